"""Every run directory and runs root this user's harness ever made, so that no agent sees any.

A run directory holds what the agent must never read or touch: its own and
other runs' ``result.json``, ``trajectory.jsonl`` and submissions. An agent that
could read another run's submission could resubmit a better policy; one that
could write a finished run's directory could forge it for ``audit``. Run
directories can be anywhere (``--run-dir``), so hiding only the runs root under
the workspace is not enough: the harness records each directory it makes for a
run here, in its own state home (which no sandbox shows), and every sandbox lays
an empty tmpfs over every recorded one that falls inside a tree it shows.

What is recorded: each run directory, each **runs root** (``./runs``, an eval set's
``--runs-root`` and its set directory: covering a root as a whole also hides what is
made under it after a sandbox started), a ``--submission-dir`` and a ``--state-dir``.

A cover is laid when a sandbox starts; a bind is live, so a directory made later
inside a tree that a running sandbox shows would appear in it (and an agent can keep
it open however it is covered afterwards). :func:`new_private_dirs` therefore records
a directory *before* making it, makes it, and then asks :mod:`ale_robotics.sandboxes.live`
whether a running sandbox shows it: if one does, what was made is removed again and
the harness refuses (:class:`VisibleToSandboxError`, exit 2). A sandbox registers
before it reads this list, and a directory is recorded before the registry is read,
so one of the two always sees the other.

The list is append-only JSON lines (``{"path": ..., "kind": ...}``); appends of a
line this short are atomic, so concurrent runs need no lock. Unreadable lines are
skipped: losing one would only un-hide a directory that the runs-root rule usually
covers anyway, while a crash here would lose the run.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.paths import state_home
from ale_robotics.sandboxes.live import watching

__all__ = [
    "DirKind",
    "VisibleToSandboxError",
    "hidden_paths",
    "known_run_dirs",
    "new_private_dirs",
    "record_run_dir",
    "run_dirs_file",
]

DirKind = Literal["run", "root", "submission", "state"]
_WHAT: dict[DirKind, str] = {
    "run": "run directory",
    "root": "runs directory",
    "submission": "submission directory",
    "state": "evaluator state directory",
}


class VisibleToSandboxError(FailedPreconditionError):
    """A directory of a run would be made where a running agent's sandbox shows it."""


def run_dirs_file() -> Path:
    """Where the list lives: ``STATE_HOME/run-dirs.jsonl`` (see :func:`state_home`)."""
    return state_home() / "run-dirs.jsonl"


def record_run_dir(path: Path, kind: DirKind = "run") -> None:
    """Add ``path`` (resolved) to the list, creating the file 0600 on first use."""
    target = run_dirs_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"path": os.path.realpath(path), "kind": kind}) + "\n"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def known_run_dirs() -> list[Path]:
    """Every recorded directory (run directories, runs roots...) that still exists, once.

    The list only grows (a line or two per run ever made) and every sandboxed run reads
    it before its agent starts, so the checks use ``os.path`` on the strings and build a
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


def _missing_chain(path: str) -> list[str]:
    """``path`` and those of its ancestors that do not exist yet, deepest first."""
    chain = []
    while not os.path.lexists(path):
        chain.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return chain


@contextlib.contextmanager
def new_private_dirs(dirs: Sequence[tuple[Path, DirKind]]) -> Iterator[None]:
    """Record ``dirs``, let the block make them, then refuse if a running sandbox shows one.

    Asked before the block too, so that a directory is usually refused before it
    exists; refusing after the block removes the directories it made (those that did
    not exist before, when they are still empty: a sandbox that registered meanwhile
    saw at most empty directories, never anything of the run). Either way it raises
    :class:`VisibleToSandboxError`, saying which run's agent would see it and what to
    do. A directory that already existed is checked too (an existing ``--state-dir``
    about to receive snapshots), never removed.
    """
    paths = [(os.path.realpath(p), kind) for p, kind in dirs]
    made: list[str] = []
    for path, kind in paths:
        record_run_dir(Path(path), kind)  # before it exists: see the module docstring
        made += _missing_chain(path)
    _refuse_if_shown(paths, [])  # the usual case: refused before anything exists
    yield
    _refuse_if_shown(paths, made)  # a sandbox that registered meanwhile


def _refuse_if_shown(paths: Sequence[tuple[str, DirKind]], made: Sequence[str]) -> None:
    """Raise if a running sandbox shows one of ``paths``, removing ``made`` first."""
    found = watching([Path(p) for p, _ in paths])
    if found is None:
        return
    entry, seen = found
    for path in sorted(set(made), key=lambda p: p.count(os.sep), reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(path)
    kind = next(k for p, k in paths if p == str(seen))
    where = f" (outside {entry.workspace})" if entry.workspace else ""
    raise VisibleToSandboxError(
        f"refusing to make the {_WHAT[kind]} {seen}: the agent of {entry.describe()} would "
        "see it (a sandbox shows what is made under its workspace after it started); wait "
        f"until that run ends, or put this one where that agent cannot see it{where}; "
        "nothing was made"
    )


def hidden_paths(private: Sequence[Path], shown: Sequence[Path]) -> list[Path]:
    """Inside the trees a sandbox shows (``shown``), what its agent must not see.

    ``private`` (what the run knows of: its run directory and runs root, the evaluator's
    state dir), every run directory, runs root, submission and state dir this harness
    ever made (:func:`known_run_dirs`: wherever it is, an earlier run's submission could
    be resubmitted, a finished run forged for ``audit``; a runs root is hidden whole, so
    that what is made in it later is hidden too), and this user's ALE state home (which
    holds those lists). Read anew at each call: a sandbox asks again once registered.
    """
    candidates = [*private, state_home().resolve(), *known_run_dirs()]
    # On strings (os.path): the candidates are every run dir ever recorded, and this
    # runs before the agent starts; pathlib costs several times more per path.
    roots = {os.path.realpath(t) for t in shown}
    insides = tuple(r if r.endswith(os.sep) else r + os.sep for r in roots)
    found: dict[str, None] = {}  # ordered, without duplicates
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real.startswith(insides):  # below a shown tree, not the tree itself
            found[real] = None
    out = [Path(p) for p in found]
    # An outer hidden directory covers the inner ones; mounting both would let
    # bwrap recreate the inner mount point inside the outer tmpfs, which is harmless
    # but noisy, so keep only the outermost.
    return [p for p in out if not any(q != p and q in p.parents for q in out)]
