"""Job stores: where batch jobs, a run's signed events and the runs opened with OpenRun live.

The interfaces (:class:`JobStore`, and :class:`EventLog`, the events part of it)
and their records (jobs, runs) are in :mod:`.base`; :func:`open_store` opens the
embedded SQLite store (a path, ``sqlite:///PATH``) or the PostgreSQL one
(``postgresql://...``, several evaluator replicas on one database). The PostgreSQL
store is imported only when one is opened, so psycopg is loaded only then.
"""

from ale_robotics.evaluator.store.base import (
    DEFAULT_LEASE_S,
    TERMINAL_STATES,
    EventLog,
    EventMaker,
    ExpiredLeases,
    FailureSource,
    JobRecord,
    JobState,
    JobStore,
    RunRecord,
    StoreUnavailable,
    new_job_id,
    new_owner_id,
    redacted,
)
from ale_robotics.evaluator.store.factory import open_store
from ale_robotics.evaluator.store.sqlite import SqliteJobStore

__all__ = [
    "DEFAULT_LEASE_S",
    "TERMINAL_STATES",
    "EventLog",
    "EventMaker",
    "ExpiredLeases",
    "FailureSource",
    "JobRecord",
    "JobState",
    "JobStore",
    "RunRecord",
    "SqliteJobStore",
    "StoreUnavailable",
    "new_job_id",
    "new_owner_id",
    "open_store",
    "redacted",
]
