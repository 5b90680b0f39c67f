"""The job store interface: where a batch job's state and a run's signed events live.

Two stores implement it (:func:`.factory.open_store` picks one from a path or URL):

* :class:`.sqlite.SqliteJobStore`, the embedded default: one file in the state
  dir, shared by the evaluator processes of one host.
* :class:`.postgresql.PostgresJobStore`: one PostgreSQL database, shared by
  evaluator replicas on several hosts.

Both keep the same rules; ``tests/evaluator/store/`` runs one contract suite
against each.

Every transition is a single transaction, so a killed evaluator leaves each job
in a state it really reached. Several evaluator processes may share one store,
so a running job belongs to the process that claimed it:

* Each store acts for one **owner** (``host:pid:random``, :func:`new_owner_id`).
  :meth:`JobStore.claim_next` marks the job RUNNING with that owner and a
  **lease** (``lease_until``, ``lease_s`` from now), which the owner renews while
  it works (:meth:`JobStore.renew`, :meth:`JobStore.heartbeat`).
* Only a RUNNING job whose lease has expired belongs to nobody any more:
  :meth:`JobStore.requeue_expired` puts it back in the queue (to be re-run from
  its snapshot; the inputs are frozen, so the result is the same). A live
  process's jobs are never touched, however many evaluators start beside it.
* Progress, heartbeat, requeue and an owner's finish are conditional on the
  caller still holding the job (``WHERE owner = ...``) and say whether they won:
  a process that lost its lease (paused past it, or the job was cancelled)
  cannot overwrite what the new owner, or the cancellation, wrote.
* A run's trusted-evaluator events get consecutive sequence numbers from 0, with
  no gap and no duplicate however many processes append at once
  (:meth:`JobStore.append_event`).

Times (``created``, ``heartbeat``, ``lease_until`` ...) are Unix seconds of the
store's clock: this host's for SQLite, the database server's for PostgreSQL, so
replicas whose clocks disagree still agree on whose lease has run out.
"""

from __future__ import annotations

import abc
import json
import os
import secrets
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, ClassVar, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from ale_robotics.errors import UnavailableError

__all__ = [
    "DEFAULT_LEASE_S",
    "TERMINAL_STATES",
    "EventLog",
    "ExpiredLeases",
    "FailureSource",
    "JobRecord",
    "JobState",
    "JobStore",
    "StoreUnavailable",
    "new_owner_id",
    "redacted",
]

DEFAULT_LEASE_S = 15.0
"""How long a claim lasts without renewal. The owner renews every third of it, so a
process must miss two renewals in a row (stopped, killed, hung) before another
evaluator may take its job over; and a killed process's job waits at most this long."""


def new_owner_id() -> str:
    """A process's owner id: host and pid for the operator, random so a reused pid differs."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class StoreUnavailable(UnavailableError):
    """The store cannot be reached right now (its database is down, the connection was
    lost): nothing changed, retry later. A gRPC caller gets UNAVAILABLE."""


class JobState(StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.REJECTED, JobState.TIMED_OUT, JobState.CANCELLED}
)


class FailureSource(StrEnum):
    NONE = ""
    SUBMISSION = "submission"
    INFRASTRUCTURE = "infrastructure"


class JobRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: str
    run_id: str
    task_id: str
    client_token: str
    state: JobState
    episodes_done: int
    episodes_total: int
    failure_source: FailureSource
    failure_reason: str
    heartbeat: float
    created: float
    updated: float
    attempts: int
    files: dict[str, str]
    """Snapshot file name -> SHA-256, recorded at submission."""
    result_json: str | None
    owner: str = ""
    """The evaluator process holding the job while RUNNING (:func:`new_owner_id`); kept
    afterwards to show which one ran it last. Empty: never claimed, or requeued."""
    lease_until: float = 0.0
    """Unix time (the store's clock) the owner's claim runs out unless renewed; 0 when
    not RUNNING."""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class ExpiredLeases:
    """What :meth:`JobStore.requeue_expired` did with the jobs whose lease ran out."""

    requeued: list[str]
    """Back in the queue, to be re-run from their snapshots."""
    failed: list[str]
    """Ended FAILED (infrastructure) instead: jobs that cannot be re-run (``fail_tokens``)."""


JOB_COLUMNS = (
    "job_id, run_id, task_id, client_token, state, episodes_done, episodes_total, "
    "failure_source, failure_reason, heartbeat, created, updated, attempts, files_json, "
    "result_json, owner, lease_until"
)
"""The ``jobs`` columns both stores select, in the order :func:`job_from_row` reads."""

REQUEUED_REASON = "requeued: the evaluator running it stopped renewing its lease"
"""The failure_reason of a job :meth:`JobStore.requeue_expired` put back in the queue."""


def job_from_row(row: tuple[Any, ...]) -> JobRecord:
    """A :class:`JobRecord` from a row of :data:`JOB_COLUMNS`."""
    return JobRecord(
        job_id=row[0],
        run_id=row[1],
        task_id=row[2],
        client_token=row[3],
        state=JobState(row[4]),
        episodes_done=row[5],
        episodes_total=row[6],
        failure_source=FailureSource(row[7]),
        failure_reason=row[8],
        heartbeat=row[9],
        created=row[10],
        updated=row[11],
        attempts=row[12],
        files=json.loads(row[13]),
        result_json=row[14],
        owner=row[15],
        lease_until=row[16],
    )


@runtime_checkable
class EventLog(Protocol):
    """A run's trusted-evaluator events, numbered per run: the part of a store that
    the run's ledger (seeds, commitments, signed events) needs.

    Every :class:`JobStore` is one: the events live in the jobs' database, so a
    job's event can be stored only while its runner holds the job, checked in the
    same transaction (``held_job``).
    """

    def append_event(
        self, run_id: str, build: Callable[[int], str], *, held_job: str | None = None
    ) -> bool: ...

    def events(self, run_id: str) -> list[str]: ...


class JobStore(abc.ABC):
    """One evaluator process's access to the shared job store; thread-safe.

    ``owner`` is the process this store acts for (default: a new
    :func:`new_owner_id`) and ``lease_s`` how long its claims last unrenewed.
    Other processes open their own store on the same file or database.
    """

    SCHEMA_VERSION: ClassVar[int]
    """The schema version this implementation writes (:meth:`schema_version` may be
    higher: a newer release's, never lowered)."""

    def __init__(self, *, owner: str | None, lease_s: float) -> None:
        if lease_s <= 0:
            raise ValueError(f"lease_s must be positive, got {lease_s}")
        self.owner = owner or new_owner_id()
        self.lease_s = lease_s

    def __enter__(self) -> JobStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --------------------------------------------------------------- lifecycle --

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The schema version the store is at (created or migrated when it was opened)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection(s); the store is not used afterwards."""

    # ------------------------------------------------------------------ reads --

    @abc.abstractmethod
    def get(self, job_id: str) -> JobRecord | None: ...

    @abc.abstractmethod
    def by_token(self, run_id: str, client_token: str) -> JobRecord | None: ...

    @abc.abstractmethod
    def latest_for_run(self, run_id: str) -> JobRecord | None:
        """The run's most recently created job."""

    @abc.abstractmethod
    def count_for_run(self, run_id: str) -> int:
        """Submissions that count against a run's quota (infrastructure failures do not)."""

    @abc.abstractmethod
    def quota_used(self, run_id: str, free_infra_failures: int) -> int:
        """Submissions that count against a run's ``max_submissions``.

        Every job counts (queued, running, scored, rejected, failed by the
        submission) except infrastructure failures, of which only the first
        ``free_infra_failures`` are free: beyond them each counts too. So however
        many jobs the infrastructure fails, a run with quota ``q`` gets at most
        ``q + free_infra_failures`` jobs evaluated and at most ``q`` verdicts on its
        hidden episodes; "fail it as infrastructure, then submit again" cannot buy
        more evaluations. (:meth:`count_for_run` is the same count with no free
        failures counted at all.)
        """

    @abc.abstractmethod
    def retries_used(self, run_id: str) -> int:
        """Re-runs a run's jobs have had: every attempt after a job's first.

        A job is attempted again only after an infrastructure failure (a crashed
        worker, an internal error, an evaluator restart), so this is the run's
        spend of ``max_infra_retries_per_run``, counted from the durable attempt
        numbers (a restart cannot reset it).
        """

    @abc.abstractmethod
    def queue_position(self, job_id: str, *, same_run: bool = False) -> int:
        """0 when running or done; otherwise 1 + the number of queued jobs ahead of it.

        ``same_run``: count only the job's own run's jobs ahead, for an evaluator that
        runs only that run's jobs (an embedded one): other runs' queued jobs on a shared
        state dir are not ahead of it there.
        """

    @abc.abstractmethod
    def holds(self, job_id: str) -> bool:
        """Whether this owner still holds the job (RUNNING, claimed by it)."""

    @abc.abstractmethod
    def events(self, run_id: str) -> list[str]:
        """The run's stored events (JSON), in sequence order."""

    # ------------------------------------------------------------ transitions --

    @abc.abstractmethod
    def create(
        self,
        *,
        run_id: str,
        task_id: str,
        client_token: str,
        episodes_total: int,
        files: dict[str, str],
        state: JobState = JobState.QUEUED,
        failure_reason: str = "",
    ) -> tuple[JobRecord, bool]:
        """Insert a job, or return the existing one for (run_id, client_token).

        A job created RUNNING (an eval session's row) is held by this store's
        owner from the start, under a lease like a claimed one; one created
        REJECTED has failure source ``submission``.
        Returns ``(job, deduplicated)``.
        """

    @abc.abstractmethod
    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        """Atomically move the oldest queued job to RUNNING, held by this owner; return it.

        Counts an attempt. ``run_id``: only that run's jobs (an evaluator embedded in
        one run must never run another's); None: any run's (a shared evaluator).
        Several processes claiming at once each get a different job.
        """

    @abc.abstractmethod
    def renew(self) -> set[str]:
        """Extend the lease of every job this owner holds; returns their ids.

        The evaluator calls it on a timer of its own (every third of the lease), so
        a job keeps its lease however long one shard or an idle eval session takes.
        A job missing from the answer is no longer this owner's (its lease expired
        and it was requeued, or it was cancelled).
        """

    @abc.abstractmethod
    def progress(self, job_id: str, episodes_done: int) -> bool:
        """Record episodes done (and renew the lease); False: the job is not this owner's."""

    @abc.abstractmethod
    def heartbeat(self, job_id: str) -> bool:
        """Renew one job's lease; False: the job is not this owner's any more."""

    @abc.abstractmethod
    def finish(
        self,
        job_id: str,
        state: JobState,
        *,
        owned: bool = False,
        failure_source: FailureSource = FailureSource.NONE,
        failure_reason: str = "",
        result_json: str | None = None,
        episodes_done: int | None = None,
    ) -> bool:
        """End a job in a terminal ``state``; returns whether this call ended it.

        ``owned``: the caller ran the job, so it ends only while still RUNNING under
        this store's owner (a lost lease or a cancellation wins). Without it, any job
        not yet terminal ends (one nobody runs: rejected on arrival, failed after its
        evaluator died). A terminal job is never changed. ``result_json`` and
        ``episodes_done`` keep their stored values when None. Raises ValueError for
        a state that is not terminal.
        """

    @abc.abstractmethod
    def requeue(self, job_id: str, reason: str) -> bool:
        """Put a job this owner holds back in the queue after an infrastructure failure
        (the attempt stays counted).

        False: it was not this owner's any more (nothing changed).
        """

    @abc.abstractmethod
    def release(self, job_id: str) -> bool:
        """Give a job claimed but never started back to the queue, attempt not counted
        (an evaluator stopping between claim and start). False: not this owner's."""

    @abc.abstractmethod
    def requeue_expired(
        self,
        *,
        run_id: str | None = None,
        fail_tokens: Collection[str] = (),
        fail_reason: str = "",
    ) -> ExpiredLeases:
        """Requeue the RUNNING jobs whose lease has expired (their evaluator is gone).

        ``run_id``: only that run's (an embedded evaluator); None: every run's.
        Jobs whose client token is in ``fail_tokens`` cannot be re-run (an eval
        session's envs died with its process): they end FAILED (infrastructure,
        ``fail_reason``) in the same transaction, so no runner can claim them first.
        A job with a live lease is never touched. Ids in creation order.
        """

    @abc.abstractmethod
    def cancel_run(self, run_id: str, reason: str) -> list[str]:
        """End the run's QUEUED and RUNNING jobs CANCELLED (whoever holds them); their
        ids in creation order.

        A process running one finds out at its next renewal or write, which it loses.
        """

    @abc.abstractmethod
    def append_event(
        self, run_id: str, build: Callable[[int], str], *, held_job: str | None = None
    ) -> bool:
        """Store the run's next trusted-evaluator event; ``build`` gets its eval_seq.

        Sequence allocation and insertion share one transaction, so concurrent
        writers of a run (threads, processes, replicas) can never produce a gap or
        a duplicate eval_seq. With ``held_job``, the event is stored only while this
        owner holds that job, checked in the same transaction: a runner that lost
        its job writes no more of its events. Returns whether the event was stored.
        ``build`` may be called again if the transaction has to be retried.
        """


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***``, for logs and error messages."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        pieces = parts.query.split("&") if parts.query else []
        secret = [p.split("=", 1)[0] == "password" for p in pieces]
        if parts.password is None and not any(secret):
            return url
        netloc = parts.netloc
        if parts.password is not None:
            userinfo, host = netloc.rsplit("@", 1)
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
        query = "&".join("password=***" if s else p for p, s in zip(pieces, secret, strict=True))
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:  # not parseable as a URL: show the scheme only
        return url.split("://", 1)[0] + "://***"
