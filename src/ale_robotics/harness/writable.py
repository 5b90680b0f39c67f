"""Every directory a run writes, checked writable before anything of the run is made.

A run writes in four places: the evaluator's state dir (its secret, keys, job store;
an embedded evaluator's only), the run directory (``--run-dir``, else a new one under
the runs root ``./runs``), and inside it the agent's ``scratch/`` and ``submission/``
(or ``--submission-dir``), and the harness's state home, where it records every run
directory it makes (:mod:`ale_robotics.sandboxes.run_dirs`). Found unwritable once the
run had started (a read-only mount, a file where a directory belongs, a directory of
another user), each failed the run midway: a traceback, exit 1 and a ``failed`` run in
``runs list``. Checked here first, each is one line saying which option or variable to
change (:class:`~ale_robotics.errors.InvalidArgumentError`: exit 2, nothing made).

A directory that exists is written to for real: an unnamed temporary file
(``O_TMPFILE`` where the file system has it, so nothing ever shows in the directory)
is made in it and dropped, the same kind of write the run makes next, so the check
and the run cannot disagree (``os.access`` answers for the real user id and guesses
nothing about ACLs or quotas). A directory that does not exist yet is made by the run,
its parents too, so the nearest existing ancestor is what must be writable; what is
made below it is the run's own.

The scratch directory is made inside the run directory, which is new or empty: it is
writable exactly when the run directory is.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import RunOptions, default_state_dir
from ale_robotics.paths import state_home

__all__ = ["WritableDir", "check_writable", "run_writes", "unwritable"]


@dataclass(frozen=True)
class WritableDir:
    """A directory the run writes: where, which option (or variable) sets it, what to do."""

    path: Path
    what: str
    """How the user names it (``--state-dir /x``, ``the runs directory /cwd/runs``), to
    start a sentence."""
    fix: str
    """What to do when it cannot be written."""


def run_writes(opts: RunOptions) -> list[WritableDir]:
    """The directories a run of ``opts`` writes, as the run will make them."""
    dirs: list[WritableDir] = []
    if opts.evaluator is None:  # an embedded (or containerized) evaluator's state dir
        if opts.state_dir is not None:
            dirs.append(
                WritableDir(
                    opts.state_dir.absolute(),
                    f"--state-dir {opts.state_dir}",
                    "give a directory this user can write",
                )
            )
        else:
            default = default_state_dir()
            dirs.append(
                WritableDir(
                    default,
                    f"the evaluator's state dir {default} (the default)",
                    "give one this user can write with --state-dir DIR, or set XDG_STATE_HOME "
                    "to a writable directory",
                )
            )
    if opts.run_dir is not None:
        dirs.append(
            WritableDir(
                opts.run_dir.absolute(),
                f"--run-dir {opts.run_dir}",
                "give a new or empty directory this user can write",
            )
        )
    else:
        root = (opts.runs_root or Path("runs")).absolute()
        dirs.append(
            WritableDir(
                root,
                f"the runs directory {root}",
                "run from a directory this user can write, or give --run-dir DIR",
            )
        )
    if opts.submission_volume is not None:
        dirs.append(
            WritableDir(
                opts.submission_volume.absolute(),
                f"--submission-dir {opts.submission_volume}",
                "give the submission volume this user can write",
            )
        )
    home = state_home()
    dirs.append(
        WritableDir(
            home,
            f"the harness's state home {home} (it records every run directory there)",
            "set XDG_STATE_HOME to a directory this user can write",
        )
    )
    return dirs


def unwritable(path: Path) -> str | None:
    """Why a directory at ``path`` cannot be written or made (to follow its name in a
    sentence: ``"is not writable (Read-only file system)"``); None when it can."""
    existing = path
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    made = "" if existing == path else f"cannot be made: {existing} "
    if not existing.is_dir():
        return f"{made}is a file, not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{made}is not writable ({exc.strerror or type(exc).__name__})"
    return None


def check_writable(dirs: list[WritableDir]) -> None:
    """Refuse the run at the first directory it could not write (one line, exit 2)."""
    for d in dirs:
        problem = unwritable(d.path)
        if problem is not None:
            raise InvalidArgumentError(f"{d.what} {problem}: {d.fix}")
