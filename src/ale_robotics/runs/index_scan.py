"""Where the runs under a runs root are, and what their files are now (for :mod:`.index`).

A run directory holds ``result.json`` (a run still going holds only ``trajectory.jsonl``);
they are found under the root at any depth up to :data:`MAX_DEPTH`, never inside a run
(its agent's ``scratch``/``submission`` may hold anything). Each run's *stamp* (size,
modification and inode change time of both files) says cheaply whether its files
changed since the index last read them; its *digest* (SHA-256 of both) records, when a
row is written, the content the row's verdict vouches for.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["MAX_DEPTH", "content_digest", "scan"]

MAX_DEPTH = 6
"""How deep under the root run directories are looked for (an eval set's
``<set>/<task>/<label>/rep<k>/`` is 4)."""

_SKIP_DIRS = frozenset({"scratch", "submission", "__pycache__"})


def _stamp(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def content_digest(run_dir: Path) -> str:
    """SHA-256 of result.json and of trajectory.jsonl ('-' for one that cannot be read), as
    the row is written: the content its verdict vouches for."""
    parts = []
    for name in ("result.json", "trajectory.jsonl"):
        try:
            with open(run_dir / name, "rb") as f:
                parts.append(hashlib.file_digest(f, "sha256").hexdigest())
        except OSError:
            parts.append("-")
    return " ".join(parts)


def scan(root: Path, unfinished: list[Path] | None = None) -> dict[str, str]:
    """Run dir (relative to ``root``, POSIX) -> the stamp of its result.json and
    trajectory.jsonl (size, mtime and ctime of each; '-' for a missing trajectory).

    ``unfinished``: gets the run dirs with a trajectory but no result.json (running or lost).
    Paths are plain strings here: every listing stats every run, and pathlib's objects
    cost more than the stats.
    """
    found: dict[str, str] = {}
    prefix = len(os.path.join(str(root), ""))

    def walk(path: str, depth: int) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.name in _SKIP_DIRS:
                continue
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            sub = entry.path
            try:
                st = os.stat(os.path.join(sub, "result.json"))
            except OSError:
                if os.path.exists(os.path.join(sub, "trajectory.jsonl")):
                    if unfinished is not None:
                        unfinished.append(Path(sub))
                elif depth < MAX_DEPTH:
                    walk(sub, depth + 1)
                continue
            try:
                traj = _stamp(os.stat(os.path.join(sub, "trajectory.jsonl")))
            except OSError:
                traj = "-"
            found[sub[prefix:]] = f"{_stamp(st)} {traj}"

    walk(str(root), 1)
    return found
