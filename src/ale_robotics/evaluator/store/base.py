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
  (:meth:`JobStore.append_event`); a run's first events (its preamble: the key,
  the seed commitment) are written once, by whichever process appends first, in
  the same transaction as the event that needed them.
* A job can be created under an id its caller chose (:func:`new_job_id`), so the
  submission's snapshot is in place under that id before any process can claim
  the job.

The store also holds what every replica must see at once, not a file of its own:

* the runs opened with OpenRun (:class:`RunRecord`: the SHA-256 of the run's agent
  token, never the token; :meth:`JobStore.add_run`, :meth:`JobStore.revoke_run`).
  A run id is taken once for all replicas, and a revoked token is refused by all
  of them from the moment the revocation commits;
* each run's practice steps (:meth:`JobStore.charge_practice_steps`), counted and
  checked against the training budget in one transaction, so replicas charging
  at once can never take the budget twice.

Times (``created``, ``heartbeat``, ``lease_until`` ...) are Unix seconds of the
store's clock: this host's for SQLite, the database server's for PostgreSQL, so
replicas whose clocks disagree still agree on whose lease has run out.
"""

from __future__ import annotations

import abc
import json
import os
import re
import secrets
import socket
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from ale_robotics.errors import UnavailableError
from ale_robotics.evaluator.states import TERMINAL_STATES, FailureSource, JobState

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
    "StoreUnavailable",
    "check_job_id",
    "check_token_sha256",
    "new_job_id",
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


_JOB_ID_RE = re.compile(r"^job-[0-9a-f]{16}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def new_job_id() -> str:
    """A new job id: ``job-`` and 16 random hex digits (64 bits: never reused).

    :meth:`JobStore.create` makes one when not given one; a caller that must put
    something in place under the id before the job exists (its snapshot,
    ``snapshots/<job_id>/``, which any replica may look for as soon as the job is
    queued) makes it here first and passes it in.
    """
    return f"job-{uuid.uuid4().hex[:16]}"


def check_job_id(job_id: str) -> str:
    """``job_id`` if it has the form :func:`new_job_id` makes; ValueError otherwise.

    A job id names a directory (``snapshots/<job_id>/``), so nothing else is stored.
    """
    if not _JOB_ID_RE.match(job_id):
        shown = job_id if len(job_id) <= 40 else job_id[:40] + "..."
        raise ValueError(
            f"job_id {shown!r} is not a job id: 'job-' and 16 lowercase hex digits, "
            "as new_job_id() makes"
        )
    return job_id


def check_token_sha256(digest: str) -> str:
    """``digest`` if it is a SHA-256 in lowercase hex; ValueError otherwise (so a plain
    token handed to the store by mistake is refused, never stored)."""
    if not _SHA256_RE.match(digest):
        raise ValueError("token_sha256 must be a SHA-256 digest in lowercase hex, not a token")
    return digest


class StoreUnavailable(UnavailableError):
    """The store cannot be reached right now (its database is down, the connection was
    lost, its disk is full): retry later. A gRPC caller gets UNAVAILABLE."""

    def __init__(self, message: str, *, fault: str = "the job store is unavailable") -> None:
        super().__init__(message)
        self.fault = fault
        """What failed, in words that name no path, URL or host: safe to show an agent
        (the message, for the operator's log, may name them)."""


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


@dataclass(frozen=True)
class RunRecord:
    """A run opened with OpenRun, as the store keeps it (:class:`.runs.RunRegistry` reads it)."""

    run_id: str
    task_id: str
    token_sha256: str
    """SHA-256 (hex) of the run's agent token; the token itself is never stored."""
    submission_dir: str
    """The run's directory on the shared submission volume; "" when it has none."""
    opened_unix: float
    closed_unix: float = 0.0
    """When CloseRun revoked the token (the store's clock); 0 while the run is open."""

    @property
    def open(self) -> bool:
        return self.closed_unix == 0.0


RUN_COLUMNS = "run_id, task_id, token_sha256, submission_dir, opened_unix, closed_unix"
"""The ``runs`` columns both stores select, in the order :func:`run_from_row` reads."""


def run_from_row(row: tuple[Any, ...]) -> RunRecord:
    """A :class:`RunRecord` from a row of :data:`RUN_COLUMNS`."""
    return RunRecord(
        run_id=str(row[0]),
        task_id=str(row[1]),
        token_sha256=str(row[2]),
        submission_dir=str(row[3]),
        opened_unix=float(row[4]),
        closed_unix=float(row[5]),
    )


def check_step_count(run_id: str, n: object) -> int:
    """``n`` if it is a practice step count (an int >= 0); ValueError naming the run otherwise."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"run {run_id!r}: a practice step count must be an integer >= 0")
    return n


EventMaker = Callable[[int], str]
"""Makes one event's JSON from its ``eval_seq`` (signing it with that number)."""


@runtime_checkable
class EventLog(Protocol):
    """A run's trusted-evaluator events, numbered per run: the part of a store that
    the run's ledger (seeds, commitments, signed events) needs.

    Every :class:`JobStore` is one: the events live in the jobs' database, so a
    job's event can be stored only while its runner holds the job, checked in the
    same transaction (``held_job``).
    """

    def append_event(
        self,
        run_id: str,
        make: EventMaker,
        *,
        held_job: str | None = None,
        preamble: Sequence[EventMaker] | None = None,
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
        job_id: str | None = None,
    ) -> tuple[JobRecord, bool]:
        """Insert a job, or return the existing one for (run_id, client_token).

        A job created RUNNING (an eval session's row) is held by this store's
        owner from the start, under a lease like a claimed one; one created
        REJECTED has failure source ``submission``.
        Returns ``(job, deduplicated)``.

        ``job_id``: the new job's id (:func:`new_job_id`; None: a new one). A caller
        whose job needs a snapshot chooses the id, puts ``snapshots/<job_id>/`` in
        place, then creates the job: another replica may claim it the moment this
        commits, and must find the snapshot. On a duplicate the existing job (with
        its own id) is returned and the given id is unused: the caller removes what
        it put in place. ValueError: ``job_id`` is malformed (:func:`check_job_id`)
        or another job's.
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
        self,
        run_id: str,
        make: EventMaker,
        *,
        held_job: str | None = None,
        preamble: Sequence[EventMaker] | None = None,
    ) -> bool:
        """Store the run's next trusted-evaluator event; ``make`` gets its eval_seq.

        Sequence allocation and insertion share one transaction under a per-run
        lock, so concurrent writers of a run (threads, processes, replicas) can never
        produce a gap or a duplicate eval_seq. With ``held_job``, the event is stored
        only while this owner holds that job, checked in the same transaction: a
        runner that lost its job writes no more of its events. Returns whether the
        event was stored.

        ``preamble``: events that must open the run's log (its ``evaluator_key``, then
        its ``seed_commitment``), stored in order before ``make``'s, as 0, 1, ...,
        only when the run has no event yet, in the same transaction: however many
        processes append a run's first event at once, the log gets one preamble.
        A refused event (``held_job``) stores no preamble either.

        The makers may be called again if the transaction has to be retried, and a
        preamble maker is not called at all once the run has events.
        """

    # ------------------------------------------------------------------ runs --

    @abc.abstractmethod
    def add_run(self, run: RunRecord) -> bool:
        """Record a run opened with OpenRun; False (nothing changed) when its id is taken.

        Run ids are single use across every replica on the store (a run's hidden
        seeds derive from its id): of processes adding one id at once, one wins.
        ``run.closed_unix`` is kept as given (an imported closed run). ValueError:
        ``token_sha256`` is not a SHA-256 hex digest (a token is never stored).
        """

    @abc.abstractmethod
    def get_run(self, run_id: str) -> RunRecord | None:
        """The run (open or closed), as stored now."""

    @abc.abstractmethod
    def open_run_by_token(self, token_sha256: str) -> RunRecord | None:
        """The open run whose agent token has this SHA-256; None for an unknown or
        revoked one. Read from the store on every call: a token revoked on another
        replica is refused here from the moment that revocation committed."""

    @abc.abstractmethod
    def revoke_run(self, run_id: str) -> RunRecord | None:
        """Close the run (its token stops working everywhere); the run as stored after.

        Idempotent: a closed run keeps its first closing time. None: no such run.
        """

    # -------------------------------------------------------- practice steps --

    @abc.abstractmethod
    def practice_steps(self, run_id: str) -> int:
        """Agent steps the run's practice sessions have taken (0 for a run with none)."""

    @abc.abstractmethod
    def charge_practice_steps(self, run_id: str, n: int, *, limit: int | None) -> tuple[bool, int]:
        """Add ``n`` agent steps to the run's count unless that would pass ``limit``.

        Returns ``(charged, count)``: the count after this charge, or, refused, the
        count that refused it (unchanged by this call). The check and the increment
        are one transaction: however many replicas charge a run at once, the count
        never passes ``limit``. ``limit`` None: always charged (a budget that is only
        declared). ValueError for a negative ``n``.
        """

    @abc.abstractmethod
    def import_practice_steps(self, counts: Mapping[str, int]) -> None:
        """Raise each run's count to at least the given one (never lowers one), in one
        transaction: importing counts a release before the store kept them wrote to
        a file. Importing the same counts twice is the same as once."""


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
