"""Batch jobs as callers see them: submit, look up, read the result, cancel a run's.

:class:`JobService` turns a request into a job of the store and back: it checks
the task, the run (:class:`~.runs.access.RunAccess`), the idempotency key and the
run's quota, snapshots the submission into the state dir, creates the job and
wakes the runner (:class:`~.runner.JobRunner`), which does the rest. Reading a
result adds the run's signed events (:class:`~.state.ledger.RunLedger`); a job that
ended without a result gets the empty one (:class:`~.results.builder.ResultBuilder`).

A fault of the evaluator's storage while it takes a submission (the snapshot or the
job store: a full disk, an I/O error, a store that is down) is the infrastructure's,
never the agent's: the agent gets UNAVAILABLE (retry with the same client token), and
the run's newest job reads FAILED with failure source INFRASTRUCTURE until a retry
gets through (:class:`~.submission_faults.SubmissionFaults`), so the harness ends the
run ``failed`` instead of scoring a submission it believes was never made.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Protocol

from ale_robotics.engines import require_engine
from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnavailableError,
)
from ale_robotics.evaluator.batch.runner import JobRunner
from ale_robotics.evaluator.batch.snapshot import snapshot_submission, staging_dir
from ale_robotics.evaluator.batch.submission_faults import SubmissionFaults
from ale_robotics.evaluator.catalog import MAX_ID_CHARS, TaskCatalog
from ale_robotics.evaluator.results.builder import ResultBuilder
from ale_robotics.evaluator.runs.access import RunAccess, check_client_token
from ale_robotics.evaluator.runs.registry import (
    NO_RUN_MESSAGE,
    PRACTICE_MESSAGE,
    TRUSTED,
    Access,
    Scope,
)
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import JobQueue, JobRecord, StoreUnavailable, new_job_id
from ale_robotics.evaluator.videos.store import VideoStore
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.result import EvalResult
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.model.states import JobState
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.spec import TaskMode, TaskSpec

__all__ = ["JobService", "SubmissionLimits"]

log = logging.getLogger(__name__)


_DEFAULT_MAX_SUBMISSIONS = 3
"""A task's quota when neither the operator nor the release manifest sets one."""


class SubmissionLimits(Protocol):
    """The operator's submission quota (an :class:`~.config.EvaluatorConfig`), read at
    each submission so that a change applies to the next one."""

    @property
    def max_submissions_per_run(self) -> int | None:
        """Submissions per run (``--max-submissions``); None: the release manifest's."""

    @property
    def free_infra_failures_per_run(self) -> int:
        """Infrastructure-failed jobs of a run that do not count against its quota."""


class JobService:
    """Submit, look up, read and cancel batch jobs; the runner runs them."""

    def __init__(
        self,
        store: JobQueue,
        ledger: RunLedger,
        results: ResultBuilder,
        tasks: TaskCatalog,
        access: RunAccess,
        runner: JobRunner,
        limits: SubmissionLimits,
        *,
        snapshots: Path,
        videos: VideoStore | None = None,
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._results = results
        self._tasks = tasks
        self._access = access
        self._runner = runner
        self._limits = limits
        self._snapshots = snapshots
        self._videos = videos
        """Keeps each job's frozen files for its videos (the runner deletes the snapshot)."""
        self._faults = SubmissionFaults()

    # -------------------------------------------------------------- queries --

    def job(self, job_id: str, run_id: str, scope: Scope = TRUSTED) -> JobRecord:
        """A job by id, or the run's newest; another run's job is NOT_FOUND for a bound caller.

        The message is the one an id that never existed gets, so a caller cannot
        tell another run's job from a guess.
        """
        if job_id:
            if len(job_id) > MAX_ID_CHARS:
                raise InvalidArgumentError(f"job_id is longer than {MAX_ID_CHARS} characters")
            if scope.runless:
                raise PermissionDeniedError(
                    NO_RUN_MESSAGE if scope.access is Access.NO_RUN else PRACTICE_MESSAGE
                )
            job = self._store.get(job_id) or self._faults.get(job_id)
            if job is None or not self._access.visible(scope, job.run_id):
                raise NotFoundError(f"no job {job_id!r}")
            return job
        run = self._access.check_run(run_id, scope)
        try:
            stored = self._store.latest_for_run(run)
        except StoreUnavailable:
            if self._faults.of_run(run) is None:
                raise
            stored = None  # the store is still down: the fault is what there is to say
        job = self._faults.newest(run, stored)
        if job is None:
            raise NotFoundError(f"run {run!r} has no batch job yet")
        return job

    def result(self, job_id: str, run_id: str, scope: Scope = TRUSTED) -> EvalResult:
        """The job's official result, with the run's signed events; once it is terminal."""
        job = self.job(job_id, run_id, scope)
        if not job.terminal:
            raise FailedPreconditionError(
                f"job {job.job_id} is {job.state.value}; the result exists once it is terminal"
            )
        if job.result_json is not None:
            result = EvalResult.model_validate_json(job.result_json)
        else:
            result = self._results.empty(job)
        try:
            events = self._ledger.events(job.run_id)
        except StoreUnavailable:
            if self._faults.get(job.job_id) is None:
                raise
            events = []  # the store that failed the submission cannot be read either
        return result.model_copy(update={"events": events})

    def queue_position(self, job: JobRecord) -> int:
        """0 when running or done, else 1 + the jobs ahead of it that this evaluator runs
        (an embedded evaluator runs only its run's: other runs' are not ahead)."""
        return self._store.queue_position(job.job_id, same_run=self._access.bound_run is not None)

    def has_job(self, run_id: str) -> bool:
        """Whether the run has any job (batch or eval session) in the store."""
        return self._store.latest_for_run(run_id) is not None

    # --------------------------------------------------------------- submit --

    def submit(
        self,
        task_id: str,
        run_id: str,
        rel_path: str,
        client_token: str,
        scope: Scope = TRUSTED,
    ) -> tuple[JobRecord, bool]:
        """Snapshot the submission and queue its job; ``(job, deduplicated)``.

        A retry with the same ``client_token`` gets the first call's job. A
        submission that breaks a rule becomes a REJECTED job at once (it counts).
        """
        task = self._tasks.task(task_id)
        if task.mode not in (TaskMode.BATCH, TaskMode.TASK_CONFIG) or task.contract is None:
            raise FailedPreconditionError(f"task {task.id} is not a batch task")
        require_engine(task)  # its kind's engine is built here, or FAILED_PRECONDITION
        run = self._access.check_run(run_id, scope)
        check_client_token(client_token)
        try:
            return self._submit(task, run, rel_path, client_token)
        except StoreUnavailable as exc:
            log.error("run %s: the job store failed while taking a submission: %s", run, exc)
            raise self._fault(run, task, client_token, exc.fault) from None

    def _submit(
        self, task: TaskSpec, run: str, rel_path: str, client_token: str
    ) -> tuple[JobRecord, bool]:
        """:meth:`submit` once the call is checked; a storage fault raises StoreUnavailable."""
        assert task.contract is not None  # submit checked
        existing = self._store.by_token(run, client_token)
        if existing is not None:
            return existing, True
        limit = self._submission_limit(task.id)
        free = self._limits.free_infra_failures_per_run
        if self._store.quota_used(run, free) >= limit:
            raise ResourceExhaustedError(
                f"run {run} has used its {limit} submissions (limit: max_submissions; "
                f"infrastructure-failed jobs count too beyond the first {free})"
            )
        volume = self._access.submission_root(run, rel_path)
        if volume is None:
            raise FailedPreconditionError("this evaluator has no submission volume configured")
        staging = staging_dir(self._snapshots)
        try:
            files = snapshot_submission(volume, rel_path, task.contract, staging)
        except OSError as exc:
            # the volume or the evaluator's disk, not the submission (rules raise
            # SubmissionRejected); no job is created, so the agent may retry
            shutil.rmtree(staging, ignore_errors=True)
            log.error("run %s: cannot snapshot a submission: %s", run, exc)
            why = f"the snapshot of the submission failed ({exc.strerror or type(exc).__name__})"
            raise self._fault(run, task, client_token, why) from None
        except SubmissionRejected as exc:
            shutil.rmtree(staging, ignore_errors=True)
            return self._reject(run, task, client_token, exc)
        job, dedup = self._enqueue(run, task, client_token, files, staging)
        if dedup:
            return job, True
        self._ledger.event(
            run,
            task,
            "submission_received",
            {"job_id": job.job_id, "task_id": task.id, "files": job.files},
        )
        self._runner.wake()
        return job, False

    def _fault(self, run: str, task: TaskSpec, client_token: str, why: str) -> UnavailableError:
        """Record that an infrastructure fault stopped a submission of ``run`` (the run's
        newest job reads FAILED, INFRASTRUCTURE, until a retry gets through) and make the
        agent's answer: UNAVAILABLE, retry, not a rejection."""
        reason = f"the evaluator's infrastructure failed while taking a submission: {why}"
        self._faults.record(run, task.id, client_token, task.eval.evaluated_episodes, reason)
        return UnavailableError(
            f"{reason}. This is not a rejection and not your fault: retry SubmitBatchEval "
            "with the same client_token; unless a retry gets through, the run ends as an "
            "infrastructure failure, with no score"
        )

    def _submission_limit(self, task_id: str) -> int:
        operator = self._limits.max_submissions_per_run
        if operator is not None:
            return operator
        entry = self._tasks.manifest_entry(task_id)
        return (
            entry.compute_budget.max_submissions if entry is not None else _DEFAULT_MAX_SUBMISSIONS
        )

    def _reject(
        self, run: str, task: TaskSpec, client_token: str, exc: SubmissionRejected
    ) -> tuple[JobRecord, bool]:
        """A REJECTED job for a submission that broke a rule, with its signed record."""
        job, dedup = self._store.create(
            run_id=run,
            task_id=task.id,
            client_token=client_token,
            episodes_total=task.eval.evaluated_episodes,
            files={},
            state=JobState.REJECTED,
            failure_reason=str(exc),
        )
        if not dedup:
            self._ledger.event(
                run, task, "submission_received", {"job_id": job.job_id, "files": {}}
            )
            self._ledger.rejection_event(run, task, job.job_id, exc)
        return job, dedup

    def _enqueue(
        self,
        run: str,
        task: TaskSpec,
        client_token: str,
        files: list[SnapshotFile],
        staging: Path,
    ) -> tuple[JobRecord, bool]:
        """Put the snapshot in place under a new job id, then create the job; ``(job,
        deduplicated)``.

        In that order because the job is claimable the moment it is created, by
        any evaluator sharing the store, and its runner reads the snapshot first.
        On a duplicate (a concurrent retry with the same token created the job
        first) the snapshot put in place is removed and the existing job returned.
        A failure of ``create`` leaves the snapshot: the job may have been stored
        all the same, and a dir no job names is reclaimed later (:func:`.snapshot.
        reclaim_snapshots`).
        """
        job_id = new_job_id()
        snapshot = self._snapshots / job_id
        staging.rename(snapshot)
        videos = self._videos if get_kind(task.eval.rollout).video_source is not None else None
        if videos is not None:  # before the job exists: its runner deletes the snapshot
            videos.keep_submission(run, job_id, snapshot)
        job, dedup = self._store.create(
            run_id=run,
            task_id=task.id,
            client_token=client_token,
            episodes_total=task.eval.evaluated_episodes,
            files={f.name: f.sha256 for f in files},
            job_id=job_id,
        )
        if dedup:
            shutil.rmtree(snapshot, ignore_errors=True)
            if videos is not None:
                shutil.rmtree(videos.job_dir(run, job_id), ignore_errors=True)
        return job, dedup

    # --------------------------------------------------------------- cancel --

    def cancel_run(self, run_id: str, reason: str = "the run was cancelled") -> list[str]:
        """End the run's queued and running jobs CANCELLED; returns their ids.

        For the harness when a run ends early (interrupted, out of time): nobody
        will read those jobs' results, so they must not keep a worker busy, nor be
        picked up later by another evaluator. A job this process is running stops
        within a poll (its workers are killed) and is neither failed nor requeued;
        one another process runs stops when that process next renews or writes.
        Each gets a signed ``result`` event saying CANCELLED and why. An evaluator
        bound to a run cancels only that run's (empty ``run_id``: that run).
        """
        run = self._access.own_run(run_id)
        ids = self._store.cancel_run(run, reason)
        # The runner drops its attempt first: a read of a snapshot deleted below then
        # fails as a consequence of the drop, never as an infrastructure failure.
        self._runner.cancel(ids)
        for job_id in ids:
            job = self._store.get(job_id)
            if job is None:
                continue
            self._ledger.event(
                job.run_id,
                self._tasks.spec(job.task_id),
                "result",
                self._results.cancelled(job_id, reason),
            )
            shutil.rmtree(self._snapshots / job_id, ignore_errors=True)
        if ids:
            log.info("run %s: cancelled %d unfinished job(s)", run, len(ids))
        return ids

    def reap_expired(self) -> list[str]:
        """Requeue the jobs whose lease expired: their evaluator died or hung.

        Only this evaluator's run's when it is bound to one. An eval session's job
        is failed instead (its envs died with the process; :class:`.leases.
        LeaseReaper`). Returns the ids requeued.
        """
        return self._runner.reap_expired()
