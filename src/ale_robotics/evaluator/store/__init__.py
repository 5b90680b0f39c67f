"""Job stores: where batch jobs, a run's signed events, the runs opened with OpenRun and
their practice steps live.

The ports the evaluator's collaborators take (:class:`JobQueue`, :class:`EventLog`,
:class:`RunStore`, :class:`PracticeBudgets`, and :class:`JobStore`, all of them) are in
:mod:`.ports`, their records in :mod:`.base`. One implementation holds every query
(:class:`SqlJobStore`, :mod:`.sql`) and runs it through a dialect (:mod:`.dialect`):
SQLite (:mod:`.sqlite`, the embedded default) or PostgreSQL (:mod:`.postgresql`,
several evaluator replicas on one database), on one schema (:mod:`.migrations`).
:func:`open_store` opens one from a path, ``sqlite:///PATH`` or ``postgresql://...``;
the PostgreSQL module, and with it psycopg, is imported only when one is opened.
"""

from ale_robotics.evaluator.store.base import (
    DEFAULT_LEASE_S,
    EventMaker,
    ExpiredLeases,
    JobRecord,
    RunRecord,
    StoreUnavailable,
    check_token_sha256,
    new_job_id,
    new_owner_id,
    redacted,
)
from ale_robotics.evaluator.store.factory import open_store
from ale_robotics.evaluator.store.identity import StoreIdentity, StoreOwnedElsewhere
from ale_robotics.evaluator.store.orphans import ExpiredJob
from ale_robotics.evaluator.store.ports import (
    EventLog,
    JobQueue,
    JobStore,
    PracticeBudgets,
    RunStore,
)
from ale_robotics.evaluator.store.sql import SqlJobStore
from ale_robotics.evaluator.store.sqlite import SqliteJobStore

__all__ = [
    "DEFAULT_LEASE_S",
    "EventLog",
    "EventMaker",
    "ExpiredJob",
    "ExpiredLeases",
    "JobQueue",
    "JobRecord",
    "JobStore",
    "PracticeBudgets",
    "RunRecord",
    "RunStore",
    "SqlJobStore",
    "SqliteJobStore",
    "StoreIdentity",
    "StoreOwnedElsewhere",
    "StoreUnavailable",
    "check_token_sha256",
    "new_job_id",
    "new_owner_id",
    "open_store",
    "redacted",
]
