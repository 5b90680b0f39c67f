"""Whether a run's harness is still alive: a lock it holds on the run directory.

A run directory with a trajectory but no ``result.json`` is either a run still going or a
run whose harness was killed (``kill -9``, a host that went down): the one case in which
a run can end without its record. The two look alike on disk, so the harness holds an
exclusive ``flock`` on the run directory itself from the moment it has made it until the
run is recorded. The kernel drops the lock when the process dies, however it dies, so a
reader that can take the lock knows the harness is gone: ``ale-robotics runs list`` shows
such a run as *lost*. No file is added to the run directory, and the descriptor is not
inherited by the agent (Python's descriptors are close-on-exec), so an orphaned agent
cannot keep a dead harness's run looking alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["harness_alive", "held_by_harness"]


@contextlib.contextmanager
def held_by_harness(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock while the block runs (the harness's whole run).

    Raises ``BlockingIOError`` when another process holds it: another harness is
    running in this directory (which :func:`.preflight.make_run_dir` refuses before).
    """
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)  # releases the lock


def harness_alive(run_dir: Path) -> bool:
    """Whether a live process holds ``run_dir``'s harness lock (False: nobody, or no such
    directory). Takes the lock shared for an instant, never blocking."""
    try:
        fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
