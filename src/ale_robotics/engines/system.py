"""What an engine takes from the host system: Debian packages, Debian's own interpreter.

Some simulators come only as distribution packages: Debian bookworm's ROS 1 (``rospy``,
``roslaunch``) is a set of apt packages for Debian's ``/usr/bin/python3``, and nothing on
PyPI. An engine says so with three attributes of :class:`~.base.Engine`
(``system_packages``, ``interpreter``, ``system_site_packages``); the build
(:mod:`.build`) then

1. installs the missing packages with ``apt-get install --no-install-recommends`` (as
   root; otherwise it stops, naming the command that would), :func:`install_packages`;
2. makes the venv from that interpreter, installs and checks the pins as for any engine
   (the venv still closed to the system, so ``pip check`` and the exact-set check see the
   pins alone, not Debian's packages, whose consistency is dpkg's);
3. opens the venv to the system's site-packages (:func:`open_to_system`), so the
   engine's modules import from both, the pins first.

A build records the packages' versions (:func:`package_versions`); it is not current once
one of them is removed (:func:`missing_packages`), and is then built again by the same
command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ale_robotics.engines.base import Engine
from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.engines.pythons import python_version

__all__ = [
    "install_packages",
    "interpreter",
    "missing_packages",
    "open_to_system",
    "package_versions",
]

Log = Callable[[str], None]


def package_versions(packages: Sequence[str]) -> dict[str, str]:
    """``{package: version}`` of those of ``packages`` installed (dpkg's view); {} where
    there is no dpkg."""
    if not packages or shutil.which("dpkg-query") is None:
        return {}
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Status}\t${Version}\n", *packages],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    found = {}
    for line in done.stdout.splitlines():
        name, status, version = [*line.split("\t"), "", ""][:3]
        if status == "installed":
            found[name] = version
    return found


def missing_packages(engine: Engine) -> list[str]:
    """The engine's system packages not installed here."""
    have = package_versions(engine.system_packages)
    return [p for p in engine.system_packages if p not in have]


def _apt_command(packages: Sequence[str]) -> str:
    return "apt-get install --no-install-recommends " + " ".join(packages)


def install_packages(engine: Engine, log: Log) -> dict[str, str]:
    """Install the engine's missing system packages (see the module docstring); their
    versions. :class:`EngineUnavailable` saying what to run where it cannot."""
    missing = missing_packages(engine)
    if not missing:
        return package_versions(engine.system_packages)
    if shutil.which("apt-get") is None or shutil.which("dpkg-query") is None:
        raise EngineUnavailable(
            f"the engine {engine.name!r} needs the Debian packages {', '.join(missing)}, and "
            "this host has no apt-get: build it on Debian or Ubuntu (its packages are "
            "Debian bookworm's)"
        )
    if os.geteuid() != 0:
        raise EngineUnavailable(
            f"the engine {engine.name!r} needs the Debian packages {', '.join(missing)}, "
            f"which only root installs: run 'sudo ale-robotics engines install {engine.name}' "
            f"once, or '{_apt_command(missing)}' as root and then the install again"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(f"{engine.name}: apt-get install {' '.join(missing)}")
    for argv, what in (
        (["apt-get", "update", "-qq"], "apt-get update"),
        (["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], "apt-get"),
    ):
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, check=False, stdin=subprocess.DEVNULL
        )
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
            raise EngineUnavailable(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))
    still = missing_packages(engine)
    if still:
        raise EngineUnavailable(f"apt-get did not install {', '.join(still)}")
    return package_versions(engine.system_packages)


def interpreter(engine: Engine) -> tuple[str, str]:
    """``(path, MAJOR.MINOR.MICRO)`` of the engine's own interpreter (``engine.interpreter``),
    which must be of the engine's ``python`` version (its pins are for that version)."""
    assert engine.interpreter is not None
    exe = engine.interpreter
    got = python_version(exe)
    if got is None:
        raise EngineUnavailable(
            f"the engine {engine.name!r} runs on {exe}, which does not run here (install "
            f"the system's python3 and its venv module: apt-get install python3-venv)"
        )
    if not got.startswith(engine.python + "."):
        raise EngineUnavailable(
            f"the engine {engine.name!r} is pinned for Python {engine.python}, and {exe} is "
            f"{got}: its system packages are for another release than Debian bookworm's"
        )
    return exe, got


_INCLUDE = re.compile(r"^include-system-site-packages\s*=.*$", re.MULTILINE)


def open_to_system(venv: Path) -> None:
    """Let ``venv`` import the system's site-packages behind its own (``pyvenv.cfg``'s
    ``include-system-site-packages``, what ``--system-site-packages`` writes)."""
    cfg = venv / "pyvenv.cfg"
    text = cfg.read_text()
    line = "include-system-site-packages = true"
    text = _INCLUDE.sub(line, text) if _INCLUDE.search(text) else text + line + "\n"
    cfg.write_text(text)
