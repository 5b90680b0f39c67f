"""The shared regions themselves: sealed memfds, their mappings, and the wake-up eventfds.

Why memfds handed over a Unix socket (SCM_RIGHTS) and not a named segment in
``/dev/shm``: a sandbox has its own ``/dev/shm`` (bwrap mounts a private one,
docker runs with ``--ipc private``), but both show the agent socket's directory, and
a file descriptor passed over a socket in it crosses any namespace.

Why the agent cannot hurt the evaluator through them:

* **seals** (``fcntl(F_ADD_SEALS)``): both regions are sealed against shrinking and
  growing (a shrunk file would kill the evaluator with SIGBUS on its next read), and
  against further seals; the response region also against writes
  (``F_SEAL_FUTURE_WRITE``: the evaluator keeps the one writable mapping it made
  before sealing; the agent's ``mmap(PROT_WRITE)``, ``write`` and a reopen through
  ``/proc/self/fd`` are all refused, and its read-only mapping cannot be
  ``mprotect``-ed writable). An evaluator whose kernel lacks the seal (before Linux
  5.1) offers no data plane (:func:`seals_supported`).
* **one copy**: the evaluator maps the request region read-only and copies a request
  out of it before it reads any field (the channel's ``_take``), so a field the agent
  changes meanwhile changes nothing that was checked.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import mmap
import os

__all__ = [
    "F_SEAL_FUTURE_WRITE",
    "Region",
    "eventfd",
    "map_region",
    "new_region",
    "seals_supported",
]

F_SEAL_FUTURE_WRITE = 0x0010
"""Linux's ``F_SEAL_FUTURE_WRITE`` (5.1+); Python's ``fcntl`` names it only from 3.13."""

_BASE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class Region:
    """One mapped memfd: its descriptor (to hand over) and its mapping."""

    def __init__(self, fd: int, size: int, writable: bool) -> None:
        self.fd = fd
        self.size = size
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
        self.view = memoryview(self.map)

    def close(self) -> None:
        """Unmap and close (idempotent). Views of numpy arrays on it must be gone first."""
        if self.fd < 0:
            return
        self.view.release()
        with contextlib.suppress(BufferError):  # a numpy view still alive: the GC unmaps later
            self.map.close()
        os.close(self.fd)
        self.fd = -1


def new_region(name: str, size: int, *, peer_writable: bool) -> Region:
    """A fresh memfd of ``size`` bytes, then sealed against size changes. The request region
    (``peer_writable``) is mapped read-only here; the response region read-write here and
    sealed against every other writer."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        region = Region(fd, size, writable=not peer_writable)
        seals = _BASE_SEALS | (0 if peer_writable else F_SEAL_FUTURE_WRITE)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(fd)
        raise
    return region


def map_region(fd: int, *, writable: bool) -> Region:
    """Map a region received from the other side (its whole size, from ``fstat``)."""
    return Region(fd, os.fstat(fd).st_size, writable)


def eventfd() -> int:
    """A non-blocking eventfd: one per direction, written once per message (:mod:`.wake`)."""
    return os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)


@functools.cache
def seals_supported() -> bool:
    """Whether this kernel seals a memfd against future writes (Linux 5.1+)."""
    try:
        fd = os.memfd_create("ale-probe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (AttributeError, OSError):
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, F_SEAL_FUTURE_WRITE)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
