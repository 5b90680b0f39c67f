"""Waiting for the other side: spin briefly on the sequence word, then block on an eventfd.

A writer stores the message, then its sequence number, then writes 1 to the eventfd
of that direction (always: a writer cannot know cheaply whether its reader sleeps,
and a write nobody waits for costs one syscall). A reader first spins re-reading the
sequence word: an answer that comes within the spin is seen without sleeping, which
saves the 10-50 µs a wake-up through the scheduler takes on a quiet host. Then it
blocks in ``poll`` on the eventfd (and on the data socket, whose end means the peer
is gone, and on an optional stop eventfd), and re-reads the word after every
wake-up: a wake-up left by an answer already seen while spinning is drained and
slept through again.

**The spin adapts to the waits.** A spin pays only when the answer comes within it;
past that it burns a core the other side (or another job of a loaded host) needs. So
each waiter keeps a moving average of how long its waits took, and spins for twice
that, at most ``spin_s``, and not at all while the average is past ``spin_s``: an
agent that steps in a tight loop gets its answers spinning, one that thinks for
milliseconds between steps (a learning update) costs the evaluator no spinning, and
on a host so loaded that the other side rarely runs in time both sides sleep. The
average keeps being measured while no spin is done, so spinning comes back when waits
get short again.

Spinning is only done on x86-64, where stores become visible to other cores in the
order they were made (so a new sequence number implies the message before it).
Elsewhere a reader always waits for the eventfd: its write and read are syscalls
that order memory between the two processes.

The spinning thread holds the GIL while it spins: another thread that wants it waits
at most ``spin_s`` (well under the interpreter's 5 ms switch interval). Giving it up
inside the loop would cost more than the spin saves: ``time.sleep(0)`` measured 150 µs
on a loaded 2-core host, ``os.sched_yield`` 3 µs and a lost time slice when others run.
"""

from __future__ import annotations

import os
import platform
import select
import time
from enum import Enum

__all__ = ["CAN_SPIN", "CLIENT_SPIN_S", "DEFAULT_SPIN_S", "Waiter", "Wake", "notify"]

CAN_SPIN = platform.machine().lower() in ("x86_64", "amd64")

DEFAULT_SPIN_S = float(os.environ.get("ALE_SHM_SPIN_US", "200")) / 1e6
"""How long a reader spins before it blocks (``ALE_SHM_SPIN_US``; 0: never spin). Longer
than a light one-env Step, shorter than anything a sleep would cost a loaded machine."""

CLIENT_SPIN_S = float(os.environ.get("ALE_SHM_CLIENT_SPIN_US", "1000")) / 1e6
"""How long the agent's side spins for its answer (``ALE_SHM_CLIENT_SPIN_US``; 0: never).

Longer than the evaluator's: a client waiting for its Step's answer has nothing else to
do (the call is synchronous), while the evaluator waiting for the next request would take
a core from an agent that is computing. A one-env Hopper Step takes 250-300 µs on the
evaluator's side, past 200 µs: with 200 the client slept through every answer, and the
answer's eventfd write woke it, a Step measured 373-421 µs against 271-292 spinning up to
1 ms (``benchmarks/interactive.py``'s one-env row, alternated, quiet 2-core host); 16- and
32-env Steps, whose physics shares the second core with a helper thread, were the same
either way. A Step longer than this (64 envs: milliseconds) is slept through as before."""

_AVG_WEIGHT = 0.125
"""Weight of the latest wait in the moving average (about the last eight count)."""

_CLOCK_EVERY = 16
"""Reads of the word between two looks at the clock."""


class Wake(Enum):
    READY = "ready"
    PEER = "peer"
    """The data socket has something to read or was closed: the caller looks."""
    STOP = "stop"
    TIMEOUT = "timeout"
    NOISE = "noise"
    """More wake-ups without a message than ``max_spurious``: the peer writes the eventfd
    for nothing (a legitimate one leaves at most one behind per message)."""


def notify(efd: int) -> None:
    """Wake the reader of ``efd`` (a full counter means it has a wake-up pending anyway)."""
    try:  # noqa: SIM105 (a hot path: contextlib.suppress costs more than the write)
        os.eventfd_write(efd, 1)
    except BlockingIOError:
        pass


class Waiter:
    """Waits until a region's sequence word (a ``memoryview`` cast to ``"Q"``) changes."""

    def __init__(
        self,
        word: memoryview,
        efd: int,
        sock_fd: int,
        stop_fd: int | None = None,
        spin_s: float = DEFAULT_SPIN_S,
        max_spurious: int | None = None,
    ) -> None:
        self._word = word
        self._efd = efd
        self._sock = sock_fd
        self._stop = stop_fd
        self.spin_s = spin_s if CAN_SPIN else 0.0
        self._poll = select.poll()
        self._poll.register(efd, select.POLLIN)
        self._poll.register(sock_fd, select.POLLIN)
        if stop_fd is not None:
            self._poll.register(stop_fd, select.POLLIN)
        self._max_spurious = max_spurious
        self._avg_s = 0.0  # moving average of the waits that ended READY
        self.spurious = 0
        """Wake-ups since the last READY that found the word unchanged (a peer that writes
        the eventfd without a message runs this up)."""

    def _ready(self, start: float) -> None:
        self.spurious = 0
        self._avg_s += _AVG_WEIGHT * (time.perf_counter() - start - self._avg_s)

    def wait(self, old: int, timeout_s: float | None) -> Wake:
        """Until the word differs from ``old`` (READY), or the socket or the stop fd is
        readable, or ``timeout_s`` passed."""
        word = self._word
        if word[0] != old:
            self.spurious = 0
            return Wake.READY
        start = time.perf_counter()
        spin = 2 * self._avg_s if self._avg_s < self.spin_s else 0.0
        if spin > 0:
            end = start + min(spin, self.spin_s)
            n = 0
            while word[0] == old:
                n += 1
                if n % _CLOCK_EVERY == 0 and time.perf_counter() > end:
                    break
            else:
                self._ready(start)
                return Wake.READY
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left_ms = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1e3))
            events = self._poll.poll(left_ms)
            if word[0] != old:
                self._ready(start)
                return Wake.READY
            if not events:
                if deadline is not None and time.monotonic() >= deadline:
                    return Wake.TIMEOUT
                continue
            for fd, _ in events:
                if fd == self._sock:
                    return Wake.PEER
                if fd == self._stop:
                    return Wake.STOP
            try:  # noqa: SIM105 (a hot path, as in notify)
                os.eventfd_read(self._efd)  # drain; the word decides
            except BlockingIOError:
                pass
            if word[0] != old:
                self._ready(start)
                return Wake.READY
            self.spurious += 1
            if self._max_spurious is not None and self.spurious > self._max_spurious:
                return Wake.NOISE
