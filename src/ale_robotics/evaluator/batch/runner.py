"""The batch job runner: one thread taking queued jobs one at a time.

For each job: re-read the frozen snapshot (checking its SHA-256), validate it
without running agent code, run the native pipeline on the hidden seeds on the
executor (:mod:`.execution`: local worker processes or Ray), then store the
``EvalResult`` and the signed events.

Whose failure a job's end is, and what it costs the run: :mod:`.attempt`. Holding a job,
and the three ways a job stops being this runner's: :mod:`.leases`. A job store that
cannot be reached for a while: :mod:`.outage`. A job's snapshot (``STATE_DIR/snapshots/
<job>/``) is deleted once the job is terminal; only queued and running jobs need theirs
(a restart re-runs them from it). Snapshots of terminal jobs, and ``staging-*`` or
unknown directories a dead process left long ago, are removed when the runner is
created, before any listener accepts a submission (:func:`.snapshot.reclaim_snapshots`).
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ale_robotics.evaluator.batch.attempt import (
    Abandoned,
    CurrentJob,
    RetryPolicy,
    Why,
    final_infra_failure,
)
from ale_robotics.evaluator.batch.evidence import collect_evidence, validate_evidence_formats
from ale_robotics.evaluator.batch.floor import measure_floor
from ale_robotics.evaluator.batch.leases import renew_leases
from ale_robotics.evaluator.batch.outage import tolerated, until_stored
from ale_robotics.evaluator.batch.plan import episode_plan, load_artifact
from ale_robotics.evaluator.batch.snapshot import reclaim_snapshots, snapshot_files
from ale_robotics.evaluator.execution import Executor, RolloutAborted, WorkerCrashed
from ale_robotics.evaluator.results.builder import ResultBuilder
from ale_robotics.evaluator.results.metrics import NonFiniteMetric, task_metrics
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import JobQueue, JobRecord, StoreUnavailable
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.result import Floor
from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.seeds import HiddenSeed
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["JobRunner", "RetryPolicy"]

log = logging.getLogger(__name__)


class JobRunner:
    """Runs the evaluator's queued batch jobs on a thread of its own.

    Everything it uses is handed to it: the job store, the executor its shards
    run on, the run ledger (hidden seeds, signed events), the result builder,
    the task lookup (``spec``), the snapshot dir, the lease reaper (``reap``,
    returning the ids it requeued) and the operator's bounds.
    """

    def __init__(
        self,
        store: JobQueue,
        pool: Executor,
        ledger: RunLedger,
        results: ResultBuilder,
        spec: Callable[[str], TaskSpec],
        snapshots: Path,
        reap: Callable[[], list[str]],
        policy: RetryPolicy,
        *,
        run_id: str | None = None,
    ) -> None:
        self._store = store
        self._pool = pool
        self._ledger = ledger
        self._results = results
        self._spec = spec
        self._snapshots = snapshots
        self._reap = reap
        self._run_id = run_id
        """Claim only this run's jobs (an evaluator embedded in one); None: any run's."""
        self._policy = policy
        self._stop = threading.Event()
        self._paused = threading.Event()  # draining: claim nothing more
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lease_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._current: CurrentJob | None = None
        self.reclaim_snapshots()

    def reclaim_snapshots(self) -> list[str]:
        """Delete snapshot dirs no job needs (:func:`.snapshot.reclaim_snapshots` says which);
        returns their names. Runs when the runner is created, before the listeners start."""
        return reclaim_snapshots(self._snapshots, self._store)

    def _finish(self, job_id: str, state: JobState, **fields: Any) -> None:
        """Record the terminal state, then delete the job's snapshot (in that order: a crash
        in between leaves a stray dir for :meth:`reclaim_snapshots`, never a live job without
        its snapshot); only while this runner holds the job, else :class:`Abandoned`."""
        finish = partial(self._store.finish, job_id, state, owned=True, **fields)
        if not until_stored(finish, self._stop, f"job {job_id}'s end"):
            self._drop(job_id, Why.LOST)
            raise Abandoned(Why.LOST.value)
        shutil.rmtree(self._snapshots / job_id, ignore_errors=True)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_loop, name="ale-job-runner", daemon=True)
        self._lease_thread = threading.Thread(
            target=renew_leases,
            args=(self._store, self._stop, self._current_attempt),
            name="ale-job-leases",
            daemon=True,
        )
        self._thread.start()
        self._lease_thread.start()

    def stop(self) -> None:
        """Stop now: the running job's rollouts are stopped, not waited for, and the job
        is left RUNNING with its lease to run out (see the module docstring)."""
        self._stop.set()
        self._wake.set()
        self._drop(None, Why.STOPPING)
        for thread in (self._thread, self._lease_thread):
            if thread is not None:
                thread.join(timeout=10)

    def drain(self) -> None:
        """Claim no more jobs (the evaluator drains); the attempt under way goes on."""
        self._paused.set()

    def abandon(self, job_id: str, timeout: float = 30.0) -> bool:
        """Stop the attempt at ``job_id`` as :meth:`stop` would (left RUNNING, quietly) and
        wait for it to end; False when no attempt at it was under way."""
        if self.current_job() != job_id:
            return False
        self._drop(job_id, Why.STOPPING)
        deadline = time.monotonic() + timeout
        while self.current_job() == job_id and time.monotonic() < deadline:
            time.sleep(0.02)
        return True

    def _current_attempt(self) -> CurrentJob | None:
        with self._lock:
            return self._current

    def current_job(self) -> str | None:
        """The job an attempt is under way for in this process, if any."""
        with self._lock:
            return None if self._current is None else self._current.job_id

    def wake(self) -> None:
        """A job was queued: look now rather than at the next poll."""
        self._wake.set()

    def reap_expired(self) -> list[str]:
        """Requeue the jobs whose lease expired (:class:`.leases.LeaseReaper`) and look for
        work at once when there are any; returns their ids."""
        requeued = self._reap()
        if requeued:
            self.wake()
        return requeued

    def cancel(self, job_ids: list[str]) -> bool:
        """The store cancelled these jobs: stop the attempt if one is running here.

        Returns whether one was; it stops within a poll, quietly."""
        with self._lock:
            current = self._current
        if current is None or current.job_id not in job_ids:
            return False
        current.drop(Why.CANCELLED)
        return True

    def _drop(self, job_id: str | None, why: Why) -> None:
        """Drop the current attempt (when it is ``job_id``'s; None: whichever runs)."""
        with self._lock:
            current = self._current
        if current is not None and job_id in (None, current.job_id):
            current.drop(why)

    def _run_loop(self) -> None:
        next_reap = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_reap:
                next_reap = time.monotonic() + self._store.lease_s / 3
                try:
                    self.reap_expired()
                except (sqlite3.Error, StoreUnavailable) as exc:
                    log.warning("cannot requeue jobs with expired leases: %s", exc)
            try:
                job = None if self._paused.is_set() else self._store.claim_next(run_id=self._run_id)
            # another process held the write lock too long, or the database is unreachable
            except (sqlite3.Error, StoreUnavailable) as exc:
                log.warning("cannot claim a job: %s", exc)
                job = None
            if job is None:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            current = CurrentJob(job.job_id)
            with self._lock:
                self._current = current
            try:
                if self._stop.is_set() or self._paused.is_set():  # since the claim
                    self._store.release(job.job_id)
                    continue
                self._attempt(job, current)
            finally:
                with self._lock:
                    self._current = None

    def _attempt(self, job: JobRecord, current: CurrentJob) -> None:
        """One attempt at ``job``; an attempt dropped midway ends here, quietly."""
        try:
            self._run_job(job, current)
        except (Abandoned, RolloutAborted):
            self._abandoned(job, current)
        except Exception as exc:
            if current.why is not None:  # a consequence of the drop (a deleted snapshot)
                self._abandoned(job, current)
                return
            # A bug must not kill the runner thread (every later job would sit
            # QUEUED forever), nor be blamed on the submission.
            log.exception("job %s: unexpected error in the runner", job.job_id)
            try:
                self._infra_failure(
                    job, current, f"internal evaluator error ({type(exc).__name__})"
                )
            except Abandoned:
                self._abandoned(job, current)
            except Exception:
                log.exception("job %s: cannot record the failure", job.job_id)

    def _abandoned(self, job: JobRecord, current: CurrentJob) -> None:
        why = current.why or Why.LOST
        if why is Why.STOPPING:
            log.debug("job %s left RUNNING: the evaluator is stopping", job.job_id)
            return
        if why is Why.CANCELLED:
            log.info("job %s cancelled; its rollouts were stopped", job.job_id)
        else:
            log.warning(
                "job %s is no longer this evaluator's (its lease expired, or another "
                "process cancelled it); attempt %d abandoned",
                job.job_id,
                job.attempts,
            )
        now = self._store.get(job.job_id)
        if now is not None and now.terminal:
            shutil.rmtree(self._snapshots / job.job_id, ignore_errors=True)

    def _event(
        self,
        job: JobRecord,
        current: CurrentJob,
        task: TaskSpec,
        kind: str,
        payload: dict[str, Any],
    ) -> None:
        """Sign one of the job's events, only while this runner still holds the job."""
        current.check()
        event = partial(self._ledger.event, job.run_id, task, kind, payload, held_job=job.job_id)
        if not until_stored(event, self._stop, f"job {job.job_id}'s {kind} event"):
            current.drop(Why.LOST)
            current.check()

    def _run_job(self, job: JobRecord, current: CurrentJob) -> None:
        """One attempt, step by step: validate the snapshot, roll out the hidden
        episodes, record the result; each step ends the job itself when it fails."""
        self._results.job_started(job.job_id)
        task = self._spec(job.task_id)
        assert task.contract is not None
        loaded = self._validate(job, current, task)
        if loaded is None:
            return
        files, weights = loaded
        seeds = self._ledger.hidden_seeds(task, job.run_id)
        runs = episode_plan(task, seeds)
        self._event(
            job,
            current,
            task,
            "evaluation_started",
            {
                "job_id": job.job_id,
                "attempt": job.attempts,
                "episodes": len(runs),
                "workers": self._pool.workers,
                "executor": self._pool.kind,
            },
        )
        t0 = time.monotonic()
        outcomes = self._roll_out(job, current, task, weights, runs, t0)
        if outcomes is None:
            return
        wall = time.monotonic() - t0  # the official measurement's: the floor runs after it
        floor = measure_floor(task, lambda null: self._rollouts(job, current, task, null, runs, t0))
        self._record_success(job, current, task, files, weights, seeds, outcomes, wall, floor)

    def _validate(
        self, job: JobRecord, current: CurrentJob, task: TaskSpec
    ) -> tuple[list[SnapshotFile], Artifact] | None:
        """The snapshot re-read (its SHA-256 checked) and the artifact loaded from it; None
        when the job ended here (REJECTED, or an infrastructure failure)."""
        try:
            files = snapshot_files(self._snapshots / job.job_id, job, task)
            weights = load_artifact(files, task)
            validate_evidence_formats(files)
        except SubmissionRejected as exc:
            current.check()
            self._finish(
                job.job_id,
                JobState.REJECTED,
                failure_source=FailureSource.SUBMISSION,
                failure_reason=str(exc),
            )
            rejection = partial(self._ledger.rejection_event, job.run_id, task, job.job_id, exc)
            until_stored(rejection, self._stop, f"job {job.job_id}'s rejection")
            return None
        except OSError as exc:
            self._infra_failure(job, current, f"cannot read the snapshot: {exc}")
            return None
        self._event(job, current, task, "validation", {"job_id": job.job_id, "passed": True})
        return files, weights

    def _roll_out(
        self,
        job: JobRecord,
        current: CurrentJob,
        task: TaskSpec,
        weights: Artifact,
        runs: list[tuple[int, int]],
        t0: float,
    ) -> list[EpisodeOutcome] | None:
        """The hidden episodes on the executor, within the job deadline; None when the
        job ended here (TIMED_OUT, a worker crash, or the policy's own fault)."""
        try:
            return self._rollouts(job, current, task, weights, runs, t0, progress=True)
        except TimeoutError:
            reason = f"evaluation exceeded the job deadline of {self._policy.job_deadline_s:.0f}s"
            current.check()
            self._finish(
                job.job_id,
                JobState.TIMED_OUT,
                failure_source=FailureSource.INFRASTRUCTURE,
                failure_reason=reason,
            )
            payload = self._results.timed_out(job.job_id, reason)
            result = partial(self._ledger.event, job.run_id, task, "result", payload)
            until_stored(result, self._stop, f"job {job.job_id}'s result")
        except WorkerCrashed as exc:
            self._infra_failure(job, current, str(exc))
        except PolicyFault as exc:
            self._submission_failure(job, current, task, exc.reason, exc.public_reason)
        return None

    def _rollouts(
        self,
        job: JobRecord,
        current: CurrentJob,
        task: TaskSpec,
        artifact: Artifact,
        runs: list[tuple[int, int]],
        t0: float,
        progress: bool = False,
    ) -> list[EpisodeOutcome]:
        """``artifact`` on the job's episodes, on the executor, within the job deadline;
        ``progress``: the job's episodes-done count follows them (the official ones)."""
        return self._pool.run(
            task,
            artifact,
            [seed for _, seed in runs],
            on_progress=(lambda n: self._held(current, lambda: self._store.progress(job.job_id, n)))
            if progress
            else None,
            deadline=t0 + self._policy.job_deadline_s,
            on_heartbeat=lambda: self._held(current, lambda: self._store.heartbeat(job.job_id)),
            indices=[index for index, _ in runs],
            abort=current.abort,
        )

    def _record_success(
        self,
        job: JobRecord,
        current: CurrentJob,
        task: TaskSpec,
        files: list[SnapshotFile],
        weights: Artifact,
        seeds: list[HiddenSeed],
        outcomes: list[EpisodeOutcome],
        wall: float,
        floor: tuple[Floor | None, str],
    ) -> None:
        """The metrics of the episodes, signed and stored: the job SUCCEEDED (or FAILED by
        the submission when a metric came out non-finite)."""
        evidence, shapes = collect_evidence(files, weights)
        steps = sum(o.length for o in outcomes)
        try:
            metrics = task_metrics(outcomes, task)
        except NonFiniteMetric as exc:
            reason = (
                f"the submission's episodes gave a non-finite {exc.name} ({exc.value}): "
                "the submission must make every metric finite"
            )
            self._submission_failure(job, current, task, reason, reason)
            return
        self._event(
            job,
            current,
            task,
            "progress_summary",
            {
                "job_id": job.job_id,
                "episodes_done": len(outcomes),
                "episodes_total": len(outcomes),
                "env_steps": steps,
                "wall_s": round(wall, 3),
            },
        )
        verdict = self._results.batch_success(
            job,
            task,
            seeds=seeds,
            outcomes=outcomes,
            metrics=metrics,
            evidence_files=evidence,
            tensor_shapes=shapes,
            wall_s=wall,
            env_steps=steps,
            workers=self._pool.workers,
            floor=floor,
        )
        self._event(job, current, task, "result", verdict.payload)
        self._finish(
            job.job_id,
            JobState.SUCCEEDED,
            result_json=verdict.result.model_dump_json(),
            episodes_done=len(outcomes),
        )

    def _submission_failure(
        self, job: JobRecord, current: CurrentJob, task: TaskSpec, reason: str, public_reason: str
    ) -> None:
        """End the job FAILED by the submission (not retried: :mod:`.attempt`). ``reason``
        (which episode, which step) goes into the official result and the signed event, read
        only by the harness; the agent's job status gets ``public_reason``, which does not
        say when a hidden episode failed."""
        log.warning("job %s failed (submission): %s", job.job_id, reason)
        verdict = self._results.batch_failure(job, task, reason)
        self._event(job, current, task, "result", verdict.payload)
        self._finish(
            job.job_id,
            JobState.FAILED,
            failure_source=FailureSource.SUBMISSION,
            failure_reason=public_reason,
            result_json=verdict.result.model_dump_json(),
        )

    def _infra_failure(self, job: JobRecord, current: CurrentJob, reason: str) -> None:
        """Re-run the job, or end it FAILED (infrastructure) when a retry bound is spent
        (:func:`.attempt.final_infra_failure`: a run cannot buy unbounded evaluations by
        failing as infrastructure)."""
        current.check()  # a dropped job's errors are the drop's, not the infrastructure's
        log.error("job %s attempt %d failed (infrastructure): %s", job.job_id, job.attempts, reason)
        used = until_stored(lambda: self._store.retries_used(job.run_id), self._stop, "retries")
        why = final_infra_failure(job.attempts, used, self._policy, reason)
        if why is None:
            note = f"retrying after an infrastructure failure: {reason}"
            again = partial(self._store.requeue, job.job_id, note)
            if not until_stored(again, self._stop, f"job {job.job_id}'s requeue"):
                self._drop(job.job_id, Why.LOST)
                raise Abandoned(Why.LOST.value)
            self._wake.set()
            return
        self._finish(
            job.job_id,
            JobState.FAILED,
            failure_source=FailureSource.INFRASTRUCTURE,
            failure_reason=why,
        )
        payload = self._results.infrastructure_failure(job.job_id)
        result = partial(self._ledger.event, job.run_id, self._spec(job.task_id), "result", payload)
        until_stored(result, self._stop, f"job {job.job_id}'s result")

    def _held(self, current: CurrentJob, write: Callable[[], bool]) -> None:
        """A progress or heartbeat write: drop the job if the store refused it (one that
        cannot be reached is no refusal, :mod:`.outage`)."""
        if not tolerated(write, f"job {current.job_id}'s heartbeat"):
            current.drop(Why.LOST)
