"""When a call to the evaluator is tried again, and how long the client waits before it.

Two kinds of retry, one clock per call (:class:`RetryClock`):

* a call's own few quick retries (``retries``) of ``UNAVAILABLE``: a listener still
  starting, a connection being replaced;
* a **retry window** (``window_s``, 0 for an agent's client): how long a call keeps trying
  an evaluator that is gone (``UNAVAILABLE``, or no answer within the call's timeout),
  from its first failure. The harness sets its ``--evaluator-retry-s`` so that an
  evaluator restarted, a replica failed over or a job store restarting costs the run a
  wait, not its result. The failure it finally raises says how long it waited.

Waits double from 0.2 s up to :data:`MAX_BACKOFF_S`; the channel's own reconnect backoff
(:data:`RECONNECT_OPTIONS`) is capped the same, so a restarted evaluator is found again
within seconds rather than after gRPC's default of up to 120 s between attempts.
"""

from __future__ import annotations

import logging
import time

from ale_robotics.errors import AleError, DeadlineExceededError, UnavailableError

__all__ = ["MAX_BACKOFF_S", "RECONNECT_OPTIONS", "RetryClock"]

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 5.0
"""The longest wait between two tries of a call, and between two reconnects."""
RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", int(MAX_BACKOFF_S * 1000)),
)
"""Channel options: reconnect to a restarted evaluator within seconds."""
_GONE = (UnavailableError, DeadlineExceededError)
"""What a gone evaluator looks like to a call: nobody listening, or no answer in time."""


class RetryClock:
    """One call's retries: :meth:`wait_or_raise` after each failure."""

    def __init__(self, endpoint: str, *, retries: int, window_s: float) -> None:
        self.endpoint = endpoint
        self.retries = retries
        self.window_s = window_s
        self.attempt = 0
        self._first_failure: float | None = None

    def wait_or_raise(self, exc: AleError) -> None:
        """Sleep before the next try, or raise ``exc`` (saying how long was waited, once a
        retry window is spent)."""
        now = time.monotonic()
        if self._first_failure is None:
            self._first_failure = now
        waited = now - self._first_failure
        gone = isinstance(exc, _GONE)
        if isinstance(exc, UnavailableError) and self.attempt < self.retries:
            pass  # one of the call's own quick retries
        elif gone and waited < self.window_s:
            if self.attempt == self.retries:
                log.warning(
                    "%s did not answer (%s); retrying for up to %.0f s",
                    self.endpoint,
                    exc.message,
                    self.window_s,
                )
        elif gone and self.window_s > 0:
            raise type(exc)(
                f"{exc.message} (retried for {waited:.0f} s, --evaluator-retry-s "
                f"{self.window_s:g}: the evaluator did not come back)"
            ) from None
        else:
            raise exc from None
        time.sleep(min(0.2 * 2**self.attempt, MAX_BACKOFF_S))
        self.attempt += 1
