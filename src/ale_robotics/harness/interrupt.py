"""Stopping a run cleanly on Ctrl-C or SIGTERM.

A signal handler that raises at an arbitrary bytecode can cut a trajectory
line in half or leave a job half-recorded. So the handler only records the
signal; the run loop polls :meth:`StopRequest.check` at the points where
stopping is safe (every pass of the agent and evaluation wait loops, between
setup steps), which raises :class:`RunInterrupted` there. A second signal while
the run is already stopping is ignored (it says so), so cleanup always finishes:
the agent and the run's jobs are stopped, and ``result.json`` says
``interrupted``.

Library callers that install nothing still get a clean stop on Ctrl-C: the
harness treats Python's own ``KeyboardInterrupt`` like :class:`RunInterrupted`.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["RunInterrupted", "StopRequest", "stop_on_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterrupted(KeyboardInterrupt):
    """The operator stopped the run (a ``KeyboardInterrupt``, so that code which lets
    Ctrl-C through lets this through too)."""

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class StopRequest:
    """The first SIGINT/SIGTERM a run received, to be acted on at a safe point."""

    def __init__(self) -> None:
        self._signal: str | None = None
        self._event = threading.Event()
        self._wakes: set[threading.Event] = set()
        """The ``wake`` events of the sleeps under way: a stop request sets them too."""

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def signal_name(self) -> str | None:
        return self._signal

    def request(self, signal_name: str) -> None:
        if self._event.is_set():
            return
        self._signal = signal_name
        self._event.set()
        for wake in tuple(self._wakes):  # no lock: this runs in a signal handler
            wake.set()

    def check(self) -> None:
        """Raise :class:`RunInterrupted` if a stop was requested."""
        if self._event.is_set():
            raise RunInterrupted(self._signal or "SIGINT")

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        """Sleep, waking early (and raising) when a stop is requested.

        With ``wake``, also wake early, without raising, once that event is set
        (by whoever the caller waits for: an agent process that exited), so that a
        loop can wait for either its next pass or the thing it watches.
        """
        if wake is None:
            self._event.wait(seconds)
        else:
            self._wakes.add(wake)
            try:
                if self._event.is_set():  # requested before ``wake`` was registered
                    wake.set()
                wake.wait(seconds)
            finally:
                self._wakes.discard(wake)
        self.check()


@contextlib.contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    """Route SIGINT and SIGTERM to ``stop`` while the block runs (main thread only).

    The previous handlers come back afterwards. Off the main thread, where Python
    cannot install handlers, nothing is installed and Ctrl-C stays a plain
    ``KeyboardInterrupt`` (which the harness handles the same way).
    """
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop.requested:
            print(f"{name}: the run is already stopping, please wait", file=sys.stderr)
            return
        stop.request(name)

    previous = {s: signal.signal(s, handler) for s in _SIGNALS}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
