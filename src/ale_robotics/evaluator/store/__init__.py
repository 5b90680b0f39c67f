"""Job stores: where batch jobs and a run's signed events live.

The interfaces (:class:`JobStore`, and :class:`EventLog`, the events part of it)
and their records are in :mod:`.base`; :func:`open_store` opens the
embedded SQLite store (a path, ``sqlite:///PATH``) or the PostgreSQL one
(``postgresql://...``, several evaluator replicas on one database). The PostgreSQL
store is imported only when one is opened, so psycopg is loaded only then.
"""

from ale_robotics.evaluator.store.base import (
    DEFAULT_LEASE_S,
    TERMINAL_STATES,
    EventLog,
    ExpiredLeases,
    FailureSource,
    JobRecord,
    JobState,
    JobStore,
    StoreUnavailable,
    new_owner_id,
    redacted,
)
from ale_robotics.evaluator.store.factory import open_store
from ale_robotics.evaluator.store.sqlite import SqliteJobStore

__all__ = [
    "DEFAULT_LEASE_S",
    "TERMINAL_STATES",
    "EventLog",
    "ExpiredLeases",
    "FailureSource",
    "JobRecord",
    "JobState",
    "JobStore",
    "SqliteJobStore",
    "StoreUnavailable",
    "new_owner_id",
    "open_store",
    "redacted",
]
