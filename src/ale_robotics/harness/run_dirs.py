"""Every run directory this user's harness ever made, so that no agent sees any of them.

A run directory holds what the agent must never read or touch: its own and
other runs' ``result.json``, ``trajectory.jsonl`` and submissions. An agent that
could read an earlier run's submission could resubmit a better policy; one that
could write a finished run's directory could forge it for ``audit``. Run
directories can be anywhere (``--run-dir``), so hiding only the runs root under
the workspace is not enough: the harness records each run directory here, in
its own state home (which no sandbox shows), and the sandbox lays an empty
tmpfs over every recorded one that falls inside a path the agent can see.

The list is append-only JSON lines (one ``{"path": ...}`` per run); appends of a
line this short are atomic, so concurrent runs need no lock. Unreadable lines
are skipped: losing one would only un-hide a directory that the runs-root rule
usually covers anyway, while a crash here would lose the run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ale_robotics.paths import state_home

__all__ = ["known_run_dirs", "record_run_dir", "run_dirs_file"]


def run_dirs_file() -> Path:
    """Where the list lives: ``STATE_HOME/run-dirs.jsonl`` (see :func:`state_home`)."""
    return state_home() / "run-dirs.jsonl"


def record_run_dir(path: Path) -> None:
    """Add ``path`` (resolved) to the list, creating the file 0600 on first use."""
    target = run_dirs_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"path": str(path.resolve())}) + "\n"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def known_run_dirs() -> list[Path]:
    """Every recorded run directory that still exists, without duplicates.

    The list only grows (one line per run ever made) and every sandboxed run reads it
    before its agent starts, so the checks use ``os.path`` on the strings and build a
    ``Path`` only for what is returned (``pathlib`` costs several times more per path).
    """
    try:
        text = run_dirs_file().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    seen: dict[str, Path] = {}
    checked: set[str] = set()
    for raw in text.splitlines():
        try:
            value = json.loads(raw).get("path")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and value not in checked:
            checked.add(value)
            if os.path.isabs(value) and os.path.isdir(value):
                seen[value] = Path(value)
    return list(seen.values())
