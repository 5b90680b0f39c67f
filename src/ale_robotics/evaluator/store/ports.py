"""The job store's ports: what the evaluator's collaborators ask of the shared store.

Each collaborator takes only the port it uses: the job service, the runner, the lease
reaper and the eval-session records a :class:`JobQueue`; the run ledger an
:class:`EventLog`; the run registry a :class:`RunStore`; the training ledger
:class:`PracticeBudgets`. :class:`JobStore` is all of them with the store's own
lifecycle, what :func:`.factory.open_store` opens and the composition root hands out.
One implementation keeps them all (:class:`.sql.SqlJobStore`, on SQLite or
PostgreSQL); ``tests/evaluator/store/`` runs one contract suite against each engine.

Every transition is a single transaction, so a killed evaluator leaves each job
in a state it really reached. Several evaluator processes may share one store,
so a running job belongs to the process that claimed it:

* Each store acts for one **owner** (``host:pid:random``, :func:`.base.new_owner_id`).
  :meth:`JobQueue.claim_next` marks the job RUNNING with that owner and a
  **lease** (``lease_until``, ``lease_s`` from now), which the owner renews while
  it works (:meth:`JobQueue.renew`, :meth:`JobQueue.heartbeat`).
* Only a RUNNING job whose lease has expired belongs to nobody any more:
  :meth:`JobQueue.requeue_expired` puts it back in the queue (to be re-run from
  its snapshot; the inputs are frozen, so the result is the same). A live
  process's jobs are never touched, however many evaluators start beside it.
* Progress, heartbeat, requeue and an owner's finish are conditional on the
  caller still holding the job (``WHERE owner = ...``) and say whether they won:
  a process that lost its lease (paused past it, or the job was cancelled)
  cannot overwrite what the new owner, or the cancellation, wrote.
* A run's trusted-evaluator events get consecutive sequence numbers from 0, with
  no gap and no duplicate however many processes append at once
  (:meth:`EventLog.append_event`); a run's first events (its preamble: the key,
  the seed commitment) are written once, by whichever process appends first, in
  the same transaction as the event that needed them.
* A job can be created under an id its caller chose (:func:`.base.new_job_id`), so
  the submission's snapshot is in place under that id before any process can claim
  the job.

The store also holds what every replica must see at once, not a file of its own:

* the runs opened with OpenRun (:class:`.base.RunRecord`: the SHA-256 of the run's
  agent token, never the token; :class:`RunStore`). A run id is taken once for all
  replicas, and a revoked token is refused by all of them from the moment the
  revocation commits;
* each run's practice steps (:class:`PracticeBudgets`), counted and checked against
  the training budget in one transaction, so replicas charging at once can never
  take the budget twice.

Times (``created``, ``heartbeat``, ``lease_until`` ...) are Unix seconds of the
store's clock: this host's for SQLite, the database server's for PostgreSQL, so
replicas whose clocks disagree still agree on whose lease has run out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from types import TracebackType
from typing import ClassVar, Protocol, Self, runtime_checkable

from ale_robotics.evaluator.store.base import (
    EventMaker,
    ExpiredLeases,
    JobRecord,
    RunRecord,
)
from ale_robotics.evaluator.store.identity import StoreIdentity
from ale_robotics.evaluator.store.orphans import ExpiredJob
from ale_robotics.model.states import FailureSource, JobState

__all__ = ["EventLog", "JobQueue", "JobStore", "PracticeBudgets", "RunStore"]


class JobQueue(Protocol):
    """Batch jobs and eval-session rows: created, claimed under a lease, ended.

    ``owner`` is the evaluator process the store acts for and ``lease_s`` how long
    its claims last unrenewed; other processes open their own store on the same
    file or database.
    """

    owner: str
    lease_s: float

    # ------------------------------------------------------------------ reads --

    def get(self, job_id: str) -> JobRecord | None: ...

    def by_token(self, run_id: str, client_token: str) -> JobRecord | None: ...

    def latest_for_run(self, run_id: str) -> JobRecord | None:
        """The run's most recently created job."""
        ...

    def count_for_run(self, run_id: str) -> int:
        """Submissions that count against a run's quota (infrastructure failures do not)."""
        ...

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
        ...

    def retries_used(self, run_id: str) -> int:
        """Re-runs a run's jobs have had: every attempt after a job's first.

        A job is attempted again only after an infrastructure failure (a crashed
        worker, an internal error, an evaluator restart), so this is the run's
        spend of ``max_infra_retries_per_run``, counted from the durable attempt
        numbers (a restart cannot reset it).
        """
        ...

    def queue_position(self, job_id: str, *, same_run: bool = False) -> int:
        """0 when running or done; otherwise 1 + the number of queued jobs ahead of it.

        ``same_run``: count only the job's own run's jobs ahead, for an evaluator that
        runs only that run's jobs (an embedded one): other runs' queued jobs on a shared
        state dir are not ahead of it there.
        """
        ...

    def holds(self, job_id: str) -> bool:
        """Whether this owner still holds the job (RUNNING, claimed by it)."""
        ...

    # ------------------------------------------------------------ transitions --

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

        ``job_id``: the new job's id (:func:`.base.new_job_id`; None: a new one). A
        caller whose job needs a snapshot chooses the id, puts ``snapshots/<job_id>/``
        in place, then creates the job: another replica may claim it the moment this
        commits, and must find the snapshot. On a duplicate the existing job (with
        its own id) is returned and the given id is unused: the caller removes what
        it put in place. ValueError: ``job_id`` is malformed
        (:func:`.base.check_job_id`) or another job's.
        """
        ...

    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        """Atomically move the oldest queued job to RUNNING, held by this owner; return it.

        Counts an attempt. ``run_id``: only that run's jobs (an evaluator embedded in
        one run must never run another's); None: any run's (a shared evaluator).
        Several processes claiming at once each get a different job.
        """
        ...

    def renew(self) -> set[str]:
        """Extend the lease of every job this owner holds; returns their ids.

        The evaluator calls it on a timer of its own (every third of the lease), so
        a job keeps its lease however long one shard or an idle eval session takes.
        A job missing from the answer is no longer this owner's (its lease expired
        and it was requeued, or it was cancelled).
        """
        ...

    def progress(self, job_id: str, episodes_done: int) -> bool:
        """Record episodes done (and renew the lease); False: the job is not this owner's."""
        ...

    def heartbeat(self, job_id: str) -> bool:
        """Renew one job's lease; False: the job is not this owner's any more."""
        ...

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
        ...

    def requeue(self, job_id: str, reason: str) -> bool:
        """Put a job this owner holds back in the queue after an infrastructure failure
        (the attempt stays counted).

        False: it was not this owner's any more (nothing changed).
        """
        ...

    def release(self, job_id: str) -> bool:
        """Give a job claimed but never started back to the queue, attempt not counted
        (an evaluator stopping between claim and start). False: not this owner's."""
        ...

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
        ...

    def fail_orphaned(self, decide: Callable[[ExpiredJob], str | None]) -> list[ExpiredJob]:
        """End FAILED (infrastructure) the expired RUNNING jobs of every run that ``decide``
        gives a reason for (the run's evaluator is gone and none can take it over); the
        jobs ended. A job with a live lease is never shown to ``decide`` nor touched
        (:mod:`.orphans`)."""
        ...

    def cancel_run(self, run_id: str, reason: str) -> list[str]:
        """End the run's QUEUED and RUNNING jobs CANCELLED (whoever holds them); their
        ids in creation order.

        A process running one finds out at its next renewal or write, which it loses.
        """
        ...


@runtime_checkable
class EventLog(Protocol):
    """A run's trusted-evaluator events, numbered per run: what the run's ledger (seeds,
    commitments, signed events) needs.

    The events live in the jobs' database, so a job's event can be stored only while
    its runner holds the job, checked in the same transaction (``held_job``).
    """

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
        ...

    def events(self, run_id: str) -> list[str]:
        """The run's stored events (JSON), in sequence order."""
        ...


class RunStore(Protocol):
    """The runs opened with OpenRun (:class:`.runs.RunRegistry` keeps its registry here)."""

    def add_run(self, run: RunRecord) -> bool:
        """Record a run opened with OpenRun; False (nothing changed) when its id is taken.

        Run ids are single use across every replica on the store (a run's hidden
        seeds derive from its id): of processes adding one id at once, one wins.
        ``run.closed_unix`` is kept as given (an imported closed run). ValueError:
        ``token_sha256`` is not a SHA-256 hex digest (a token is never stored).
        """
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run (open or closed), as stored now."""
        ...

    def open_run_by_token(self, token_sha256: str) -> RunRecord | None:
        """The open run whose agent token has this SHA-256; None for an unknown or
        revoked one. Read from the store on every call: a token revoked on another
        replica is refused here from the moment that revocation committed."""
        ...

    def revoke_run(self, run_id: str) -> RunRecord | None:
        """Close the run (its token stops working everywhere); the run as stored after.

        Idempotent: a closed run keeps its first closing time. None: no such run.
        """
        ...


class PracticeBudgets(Protocol):
    """Each run's practice steps (:class:`.training_budget.TrainingLedger` counts here)."""

    def practice_steps(self, run_id: str) -> int:
        """Agent steps the run's practice sessions have taken (0 for a run with none)."""
        ...

    def charge_practice_steps(self, run_id: str, n: int, *, limit: int | None) -> tuple[bool, int]:
        """Add ``n`` agent steps to the run's count unless that would pass ``limit``.

        Returns ``(charged, count)``: the count after this charge, or, refused, the
        count that refused it (unchanged by this call). The check and the increment
        are one statement: however many replicas charge a run at once, the count
        never passes ``limit``. ``limit`` None: always charged (a budget that is only
        declared). ValueError for a negative ``n``.
        """
        ...


class JobStore(JobQueue, EventLog, RunStore, PracticeBudgets, Protocol):
    """One evaluator process's access to the shared store, every port of it; thread-safe."""

    SCHEMA_VERSION: ClassVar[int]
    """The schema version this release creates (:meth:`schema_version` may be higher:
    a newer release's, never lowered)."""

    def schema_version(self) -> int:
        """The schema version the store is at (created or migrated when it was opened)."""
        ...

    def bind_identity(self, mine: StoreIdentity) -> StoreIdentity:
        """Record ``mine`` as the store's owner unless one is recorded; the one recorded.

        The first evaluator to open the store records its fingerprints; of evaluators
        opening a fresh store at once, one wins and all get the winner's
        (:mod:`.identity`: the caller refuses to start on a mismatch).
        """
        ...

    def close(self) -> None:
        """Release the connection(s); the store is not used afterwards."""
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
