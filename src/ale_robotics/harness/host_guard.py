"""Keep the harness process from importing or reading anything an agent could have written.

The harness is trusted and holds the harness token (and, embedded, the
evaluator's secret); it runs on after the agent has exited, importing modules
lazily (matplotlib for the plot) and reading config files relative to its
working directory (``./matplotlibrc``). Started as ``python -m ale_robotics``,
Python puts the current directory first on ``sys.path``; if that directory is
one the agent could write, a planted ``matplotlib/`` package runs inside the
harness. :func:`harden_harness_process` closes that for every entry point:

* ``sys.path`` loses the current directory (``''`` or its absolute path) and
  any entry under a directory the caller names as agent-writable;
* ``PYTHONSAFEPATH=1`` is exported, so the spawned evaluation workers and any
  other Python the harness starts do not prepend their working directory;
* the working directory becomes a fresh private directory of the harness's own
  (0700), so relative reads (``./matplotlibrc``) find nothing an agent put there.

Call it after every relative path of the command line has been resolved.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["harden_harness_process", "safe_sys_path", "working_directory"]


def working_directory() -> Path:
    """The current directory, or ``/`` when it was removed under us."""
    try:
        return Path.cwd()
    except OSError:
        return Path("/")


def safe_sys_path(
    entries: Iterable[str], cwd: Path, agent_writable: Iterable[Path] = ()
) -> list[str]:
    """``entries`` without the working directory and without agent-writable paths."""
    banned = [cwd.resolve(), *(p.resolve() for p in agent_writable)]
    out: list[str] = []
    for entry in entries:
        if entry in ("", "."):
            continue
        try:
            real = Path(entry).resolve()
        except OSError:
            continue
        if real == banned[0]:
            continue
        if any(real == b or b in real.parents for b in banned[1:]):
            continue
        out.append(entry)
    return out


def harden_harness_process(agent_writable: Iterable[Path] = ()) -> Path:
    """Apply the rules of the module docstring; returns the new working directory."""
    sys.path[:] = safe_sys_path(sys.path, working_directory(), agent_writable)
    os.environ["PYTHONSAFEPATH"] = "1"
    private = Path(tempfile.mkdtemp(prefix="ale-harness-"))
    os.chmod(private, 0o700)
    os.chdir(private)
    atexit.register(shutil.rmtree, private, True)
    return private
