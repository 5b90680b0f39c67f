"""The runner's writes across a job store outage (a PostgreSQL restart, SQLite busy).

A store that cannot be reached for a few seconds must not cost a job its attempt, nor
leave it RUNNING for good. Before this module, a heartbeat that failed while the
database restarted failed the attempt as "internal evaluator error"; recording that
failure failed too, and the job stayed RUNNING under this process, whose lease renewal
kept it so for ever (a stuck run). So:

* a heartbeat or progress write that cannot reach the store is skipped
  (:func:`tolerated`): the rollouts go on, the lease renewal thread keeps trying, and a
  lease really lost meanwhile shows at the next write that reaches the store (which the
  store refuses: the attempt is then abandoned as lost, as always);
* a write that ends or records the job (its signed events, its terminal state, a
  requeue) waits for the store (:func:`until_stored`), with backoff, for as long as the
  evaluator runs: once the store is back it lands, or, if the lease ran out meanwhile and
  another process took the job, the store refuses it and the attempt is abandoned. An
  evaluator stopping meanwhile leaves the job RUNNING for its lease to run out, as any
  stop does.

A write whose connection broke after the database committed it is, rarely, written
twice: a second terminal write is refused (the job is already terminal) and a second
event is numbered after the first; the store cannot tell such a write from one that
never reached it (:mod:`.store.postgresql`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from ale_robotics.evaluator.batch.attempt import Abandoned, Why
from ale_robotics.evaluator.store import StoreUnavailable

__all__ = ["STORE_DOWN", "tolerated", "until_stored"]

log = logging.getLogger(__name__)

T = TypeVar("T")

STORE_DOWN = (StoreUnavailable, sqlite3.OperationalError)
"""What a store that cannot be written right now raises (SQLite: busy or locked past
its timeout, a disk full; PostgreSQL: any lost or refused connection)."""
_FIRST_WAIT_S = 0.25
_MAX_WAIT_S = 5.0


def tolerated(write: Callable[[], bool], what: str) -> bool:
    """``write()``, or True (still held, as far as anyone can tell) when the store cannot
    be reached: for a heartbeat or progress write, which the next one repeats."""
    try:
        return write()
    except STORE_DOWN as exc:
        log.warning("%s skipped: the job store cannot be reached (%s)", what, exc)
        return True


def until_stored(write: Callable[[], T], stop: threading.Event, what: str) -> T:
    """``write()``, retried with backoff while the store cannot be reached; raises
    :class:`.attempt.Abandoned` (stopping) when the evaluator stops meanwhile."""
    wait = _FIRST_WAIT_S
    warned = False
    while True:
        try:
            result = write()
        except STORE_DOWN as exc:
            if not warned:
                log.warning("%s waits for the job store (%s)", what, exc)
                warned = True
            if stop.wait(wait):
                raise Abandoned(Why.STOPPING.value) from None
            wait = min(wait * 2, _MAX_WAIT_S)
            continue
        if warned:
            log.info("%s stored: the job store is back", what)
        return result
