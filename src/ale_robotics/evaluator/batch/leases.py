"""Job leases: renewing this process's, and taking back those of an evaluator that died.

:func:`renew_leases` is the runner's lease thread: every third of the lease, however long
a shard runs, so that a live process never loses a job it is running. What follows is
the other side, the leases that ran out unrenewed.

A batch job goes back in the queue (its snapshot is frozen, so a re-run gives
the same result); an eval session's job cannot be re-run (its envs died with
the process), so the store ends it FAILED (infrastructure) in the same
transaction and its signed ``result`` is added here (:class:`.sessions.eval_record.
EvalRecords`). Only this evaluator's run's jobs when it is bound to one; never
a live process's. A job of a run that no evaluator can serve again (its embedded
evaluator died with its harness) is failed instead, whichever run this evaluator
serves (:mod:`.orphans`).

Holding a job (:mod:`.store` has the lease model): the runner claims only its
run's jobs when the evaluator is embedded in one run (``config.run_id``), any
run's otherwise. A thread of its own renews the leases of everything this
process holds every third of ``config.job_lease_s``, however long a shard
runs; the loop requeues jobs whose lease expired (another process died with
them) as often. Every event and transition of a job is conditional on still
holding it. A job can stop being this runner's three ways, and each stops its
rollouts at once (:class:`.execution.RolloutAborted`), quietly, recording nothing:

* cancelled (:meth:`.runner.JobRunner.cancel`, from :meth:`.jobs.JobService.cancel_run`):
  the job is CANCELLED already; its snapshot is deleted.
* lost (a renewal or a write refused: the lease expired while this process was
  stalled and another took the job, or another process cancelled it): whatever
  the store says now stands.
* the evaluator stopping (:meth:`.runner.JobRunner.stop`): the job stays RUNNING and its
  lease runs out unrenewed, so a shared evaluator on the same store can take it
  over; nothing is requeued or failed on the way out. A drain
  (:meth:`.runner.JobRunner.drain`, then :meth:`.runner.JobRunner.abandon` past its
  deadline, :mod:`.server.drain`) stops claiming first and requeues the job itself.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

from ale_robotics.evaluator.batch.attempt import CurrentJob, Why
from ale_robotics.evaluator.batch.orphans import OrphanPolicy
from ale_robotics.evaluator.sessions.eval_record import EVAL_SESSION_TOKEN, EvalRecords
from ale_robotics.evaluator.state.directory import StateDir
from ale_robotics.evaluator.store import JobQueue, StoreUnavailable

__all__ = ["LeaseReaper", "renew_leases"]

log = logging.getLogger(__name__)

_FAIL_REASON = "the evaluator running the eval session stopped during it; this run cannot be scored"


class LeaseReaper:
    """Requeues (or, for eval sessions, fails) the jobs whose lease expired.

    ``state``: the state dir, to tell which runs' jobs no evaluator can take over any more
    (:mod:`.orphans`): those of every run are failed first; None: none are.
    """

    def __init__(
        self,
        store: JobQueue,
        records: EvalRecords,
        *,
        bound_run: str | None,
        state: StateDir | None = None,
    ) -> None:
        self._store = store
        self._records = records
        self._bound_run = bound_run
        self._orphans = (
            None
            if state is None
            else OrphanPolicy(bound_run=bound_run, resumable=state.has_run_token)
        )

    def reap(self) -> list[str]:
        """Fail the expired jobs nobody can take over, requeue the expired batch jobs and
        fail the expired eval sessions; returns the ids requeued (the runner then looks
        for work at once)."""
        if self._orphans is not None:
            orphaned = self._store.fail_orphaned(self._orphans)
            for job in orphaned:
                log.warning(
                    "job %s of run %s failed: its evaluator (%s) died and no evaluator can "
                    "take the run over",
                    job.job_id,
                    job.run_id,
                    job.owner,
                )
            self._records.fail_interrupted(job.job_id for job in orphaned)
        expired = self._store.requeue_expired(
            run_id=self._bound_run, fail_tokens=(EVAL_SESSION_TOKEN,), fail_reason=_FAIL_REASON
        )
        if expired.requeued:
            log.warning(
                "requeued %d job(s) whose evaluator stopped renewing its lease (it died or "
                "hung): %s",
                len(expired.requeued),
                ", ".join(expired.requeued),
            )
        self._records.fail_interrupted(expired.failed)
        return expired.requeued


def renew_leases(
    store: JobQueue, stop: threading.Event, current: Callable[[], CurrentJob | None]
) -> None:
    """Renew this process's leases every third of the lease until ``stop``; the attempt
    under way (``current()``) is dropped as lost when its job is no longer held."""
    every = store.lease_s / 3
    while not stop.wait(every):
        try:
            held = store.renew()
        # SQLite busy past its timeout, or the database unreachable: the next one retries
        except (sqlite3.Error, StoreUnavailable) as exc:
            log.warning("cannot renew the job leases: %s", exc)
            continue
        attempt = current()
        if attempt is not None and attempt.job_id not in held and not stop.is_set():
            attempt.drop(Why.LOST)
