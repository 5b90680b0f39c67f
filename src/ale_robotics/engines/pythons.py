"""Which interpreter builds an engine's environment: one of the engine's ``MAJOR.MINOR``.

Looked for in this order, each candidate run once to read its real version (a pyenv
shim on ``PATH`` may point at another version, or at none):

1. ``ALE_PYTHON_<MAJOR>_<MINOR>`` (e.g. ``ALE_PYTHON_3_12=/usr/bin/python3.12``): an
   operator's choice, used as given or refused;
2. the interpreter running this process, when it has the version (the evaluator's own
   base interpreter, not its venv's);
3. ``python<MAJOR>.<MINOR>`` on ``PATH``;
4. pyenv's installs, ``$PYENV_ROOT/versions/<MAJOR>.<MINOR>.*`` (newest patch first).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ale_robotics.engines.errors import EngineUnavailable

__all__ = ["find_python", "python_version"]

_VERSION = re.compile(r"^(\d+)\.(\d+)$")


def python_version(exe: str) -> str | None:
    """``MAJOR.MINOR.MICRO`` of the interpreter ``exe``, or None where it does not run."""
    try:
        done = subprocess.run(
            [exe, "-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+", out) else None


def _pyenv_candidates(version: str) -> list[str]:
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found = glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}"))

    def micro(path: str) -> int:
        m = re.search(rf"{re.escape(version)}\.(\d+)", path)
        return int(m.group(1)) if m else -1

    return sorted(found, key=micro, reverse=True)


def find_python(version: str) -> tuple[str, str]:
    """``(path, MAJOR.MINOR.MICRO)`` of an interpreter of ``version`` (``"3.12"``);
    :class:`EngineUnavailable` naming how to get one when there is none."""
    if not _VERSION.match(version):
        raise ValueError(f"an engine's python is MAJOR.MINOR, not {version!r}")
    var = "ALE_PYTHON_" + version.replace(".", "_")
    chosen = os.environ.get(var)
    if chosen:
        got = python_version(chosen)
        if got is None or not got.startswith(version + "."):
            raise EngineUnavailable(
                f"{var}={chosen} is not a Python {version} interpreter "
                f"({'it does not run' if got is None else 'it is ' + got}): point it at one"
            )
        return chosen, got
    candidates: list[str] = []
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        candidates.append(getattr(sys, "_base_executable", None) or sys.executable)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    candidates += _pyenv_candidates(version)
    for exe in candidates:
        got = python_version(exe)
        if got is not None and got.startswith(version + "."):
            return exe, got
    raise EngineUnavailable(
        f"no Python {version} interpreter found (tried {len(candidates)}: this process's, "
        f"python{version} on PATH, pyenv's versions): install one (pyenv install {version}, "
        f"or your distribution's python{version} with its venv module) or name it with "
        f"{var}=/path/to/python{version}"
    )
