"""The evaluator's logic, independent of gRPC: submit, run, report.

:class:`Evaluator` owns the state dir (secret, keys), the job store and the
rollout pool; the gRPC servicer is a thin translation layer over it. A single
runner thread takes queued jobs one at a time: validation, then the native
pipeline on hidden seeds, then the stored ``EvalResult`` and signed events.

Several evaluators may share one state dir (every ``ale-robotics run`` embeds
one on the default dir): each holds the jobs it runs under a lease (:mod:`.store`),
so starting one never disturbs another's jobs. An evaluator embedded in a run
(``config.run_id``) claims, requeues and cancels only that run's jobs.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from ale_robotics import __version__
from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator.eval_record import EVAL_SESSION_TOKEN, fail_interrupted
from ale_robotics.evaluator.execution import WorkerLimits, check_executor, make_executor
from ale_robotics.evaluator.result import (
    EvalResult,
    SmokeRun,
    TrainingUsage,
    simulator_versions,
)
from ale_robotics.evaluator.runner import JobRunner
from ale_robotics.evaluator.runs import (
    NO_RUN_MESSAGE,
    TRUSTED,
    Access,
    OpenedRun,
    RunClosed,
    RunRegistry,
    Scope,
)
from ale_robotics.evaluator.sessions import SessionManager
from ale_robotics.evaluator.smoke import smoke_run, smoke_task
from ale_robotics.evaluator.snapshot import SubmissionRejected, snapshot_submission
from ale_robotics.evaluator.state import StateDir
from ale_robotics.evaluator.store import DEFAULT_LEASE_S, JobRecord, JobState, open_store
from ale_robotics.evaluator.training_budget import TrainingLedger
from ale_robotics.seeds import HiddenSeed, derive_seeds, secret_commitment
from ale_robotics.tasks.registry import Registry, TrainingBudget
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND, KEY_EVENT_KIND, EvaluatorSigner

__all__ = ["Evaluator", "EvaluatorConfig"]

log = logging.getLogger(__name__)

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TOKEN_RE = re.compile(r"^[\x21-\x7e]{1,128}$")
_MAX_ID_CHARS = 128
"""Longer task or job ids are refused unread: an id is echoed in NOT_FOUND messages,
and a status message travels in a size-limited trailer."""


class EvaluatorConfig:
    """Operator settings of one evaluator process."""

    def __init__(
        self,
        state_dir: Path,
        submission_volume: Path | None,
        *,
        task_id: str | None = None,
        run_id: str | None = None,
        workers: int | None = None,
        job_deadline_s: float = 900.0,
        max_attempts: int = 3,
        max_submissions_per_run: int | None = None,
        worker_limits: WorkerLimits | None = None,
        smoke_episodes: int | None = None,
        max_sessions: int | None = None,
        max_sessions_total: int | None = None,
        per_run_tokens: bool = False,
        max_infra_retries_per_run: int = 3,
        free_infra_failures_per_run: int = 1,
        job_lease_s: float = DEFAULT_LEASE_S,
        store_url: str | None = None,
        executor: str = "local",
        ray_address: str | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.submission_volume = submission_volume
        self.task_id = task_id
        self.run_id = run_id
        self.workers = workers
        self.job_deadline_s = job_deadline_s
        self.max_attempts = max_attempts
        self.max_submissions_per_run = max_submissions_per_run
        if max_infra_retries_per_run < 0 or free_infra_failures_per_run < 0:
            raise ValueError("the per-run infrastructure allowances must be >= 0")
        self.max_infra_retries_per_run = max_infra_retries_per_run
        """Re-runs after infrastructure failures a run may have in all, across its jobs
        (each job also at most ``max_attempts`` attempts); see :mod:`.runner`."""
        self.free_infra_failures_per_run = free_infra_failures_per_run
        """Infrastructure-failed jobs of a run that do not count against its submission
        quota; each one beyond counts (:meth:`.store.JobStore.quota_used`)."""
        if job_lease_s <= 0:
            raise ValueError(f"job_lease_s must be positive, got {job_lease_s}")
        self.job_lease_s = job_lease_s
        """How long this process's hold on a running job lasts unrenewed (renewed every
        third of it): a job of a process that died is taken over this long after its
        last renewal, by an evaluator on the same state dir that may run it."""
        self.store_url = store_url
        """The job store (:func:`.store.open_store`): a path, ``sqlite:///PATH`` or
        ``postgresql://...`` (replicas on several hosts share one database). None: the
        SQLite file in the state dir."""
        self.worker_limits = worker_limits
        """Resource limits of rollout workers (None: :class:`WorkerLimits` defaults)."""
        check_executor(executor, ray_address)
        self.executor = executor
        """Where the shards run (:func:`.execution.make_executor`): 'local' worker
        processes, or 'ray' (a local Ray instance, or the cluster at ``ray_address``)."""
        self.ray_address = ray_address
        if smoke_episodes is not None and smoke_episodes < 1:
            raise ValueError(f"smoke_episodes must be at least 1, got {smoke_episodes}")
        self.smoke_episodes = smoke_episodes
        if max_sessions is not None and max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.max_sessions = max_sessions
        """Operator override of the tasks' session.max_sessions (concurrent sessions per run)."""
        if max_sessions_total is not None and max_sessions_total < 1:
            raise ValueError(f"max_sessions_total must be at least 1, got {max_sessions_total}")
        self.max_sessions_total = max_sessions_total
        """Concurrent sessions of all runs together: a safety net of a shared evaluator,
        whose runs each have their own max_sessions (None: ``sessions.DEFAULT_MAX_SESSIONS_TOTAL``,
        never below the per-run limit)."""
        self.per_run_tokens = per_run_tokens
        """Without run_id: True (``evaluator serve`` without ``--run-id``) makes each run's
        agent use the token OpenRun issued for it, and the state dir's agent.token reach no
        run (GetSpec and run-less practice sessions only). False keeps the single-tenant
        behaviour of in-process fixtures: agent.token acts for any run not opened with
        OpenRun. Ignored with run_id (that token is bound to the run)."""
        """A smoke run (``ale-robotics run --episodes N``): every task is evaluated on its
        first N episodes only, and every result says so (:mod:`.smoke`). None: official."""


class Evaluator:
    def __init__(self, config: EvaluatorConfig, registry: Registry) -> None:
        self.config = config
        self.registry = registry
        self.state = StateDir(config.state_dir)
        self._secret = self.state.secret()
        self.secret_sha256 = secret_commitment(self._secret)
        self.signer = EvaluatorSigner.load_or_create(self.state.signing_key_path)
        self.store = open_store(config.store_url or self.state.db_path, lease_s=config.job_lease_s)
        self.pool = make_executor(
            config.executor,
            workers=config.workers,
            limits=config.worker_limits,
            ray_address=config.ray_address,
        )
        self.runs = RunRegistry(self.state.runs_path)
        # Practice steps per run, against the manifest's training budgets; kept in the
        # state dir so that a restart does not hand a run its budget again.
        self.training = TrainingLedger(self.state.root / "practice_steps.json")
        self._budgets: dict[str, TrainingBudget | None] = {}
        self._event_lock = threading.Lock()
        self.runner = JobRunner(self)
        if config.task_id is not None:
            registry.get(config.task_id)  # fail fast on an unknown task
        self.sessions = SessionManager(self)
        # Jobs a dead process left RUNNING, once their lease has run out (the runner
        # looks again every third of the lease); never a live process's.
        self.reap_expired()

    # ------------------------------------------------------------ lifecycle --

    def start(self) -> None:
        self.runner.start()
        self.sessions.start()

    def stop(self) -> None:
        """Stop at once. A running job's rollouts are stopped, not waited for; the job
        stays RUNNING and its lease runs out unrenewed, so an evaluator on the same
        state dir that may run it takes it over (cancel the run first to end it)."""
        self.sessions.stop()  # records unfinished eval sessions while the store is open
        self.training.save()
        self.runner.stop()
        self.pool.shutdown()
        self.store.close()

    # -------------------------------------------------------------- queries --

    def task(self, task_id: str) -> TaskSpec:
        if len(task_id) > _MAX_ID_CHARS:
            raise InvalidArgumentError(f"task_id is longer than {_MAX_ID_CHARS} characters")
        if not task_id:
            if self.config.task_id is None:
                raise InvalidArgumentError("task_id is required: this evaluator serves every task")
            task_id = self.config.task_id
        elif self.config.task_id is not None and task_id != self.config.task_id:
            raise NotFoundError(
                f"this evaluator serves task {self.config.task_id!r}, not {task_id!r}"
            )
        return self.spec(task_id)

    def spec(self, task_id: str) -> TaskSpec:
        """The task as this evaluator runs it: the registry's, cut short in a smoke run."""
        task = self.registry.get(task_id)
        n = self.config.smoke_episodes
        return task if n is None else smoke_task(task, n)

    def training_budget(self, task: TaskSpec) -> TrainingBudget | None:
        """The task's training budget (the manifest's, in agent steps too); None: none."""
        if task.id not in self._budgets:  # a smoke run cuts episodes, never the budget
            self._budgets[task.id] = self.registry.training_budget(task.id)
        return self._budgets[task.id]

    def training_usage(self, task: TaskSpec, run_id: str) -> TrainingUsage:
        """The run's practice steps so far against the task's budget."""
        return self.training.usage(run_id, self.training_budget(task))

    def smoke_run(self, task_id: str) -> SmokeRun | None:
        """What results of this task must say about a smoke run; None for an official one."""
        n = self.config.smoke_episodes
        return None if n is None else smoke_run(self.registry.get(task_id), n)

    def _check_run(self, run_id: str) -> str:
        if not run_id:
            if self.config.run_id is None:
                raise InvalidArgumentError("run_id is required (the harness sets ALE_RUN_ID)")
            return self.config.run_id
        if not _RUN_ID_RE.match(run_id):
            raise InvalidArgumentError(
                "run_id must be 1-64 characters of letters, digits, '.', '_' or '-'"
            )
        if self.config.run_id is not None and run_id != self.config.run_id:
            raise PermissionDeniedError(f"this evaluator only accepts run {self.config.run_id!r}")
        return run_id

    def job(self, job_id: str, run_id: str, scope: Scope = TRUSTED) -> JobRecord:
        """A job by id, or the run's newest; another run's job is NOT_FOUND for a bound caller.

        The message is the one an id that never existed gets, so a caller cannot
        tell another run's job from a guess.
        """
        if job_id:
            if len(job_id) > _MAX_ID_CHARS:
                raise InvalidArgumentError(f"job_id is longer than {_MAX_ID_CHARS} characters")
            if scope.access is Access.NO_RUN:
                raise PermissionDeniedError(NO_RUN_MESSAGE)
            job = self.store.get(job_id)
            if job is None or not self.visible(scope, job.run_id):
                raise NotFoundError(f"no job {job_id!r}")
            return job
        run = self.check_run(run_id, scope)
        job = self.store.latest_for_run(run)
        if job is None:
            raise NotFoundError(f"run {run!r} has no batch job yet")
        return job

    def result(self, job_id: str, run_id: str, scope: Scope = TRUSTED) -> EvalResult:
        job = self.job(job_id, run_id, scope)
        if not job.terminal:
            raise FailedPreconditionError(
                f"job {job.job_id} is {job.state.value}; the result exists once it is terminal"
            )
        if job.result_json is not None:
            result = EvalResult.model_validate_json(job.result_json)
        else:
            result = self._empty_result(job)
        events = [json.loads(e) for e in self.store.events(job.run_id)]
        return result.model_copy(update={"events": events})

    def _empty_result(self, job: JobRecord) -> EvalResult:
        return EvalResult(
            job_id=job.job_id,
            run_id=job.run_id,
            task_id=job.task_id,
            task_config_sha256=self.registry.entry(job.task_id).sha256,
            state=job.state.value,
            failure_source=job.failure_source.value,
            failure_reason=job.failure_reason,
            submission_files=job.files,
            secret_sha256=self.secret_sha256,
            evaluator_version=__version__,
            simulator_versions=simulator_versions(self.registry.get(job.task_id).simulator.package),
            attempts=job.attempts,
            smoke_run=self.smoke_run(job.task_id),
        )

    # ------------------------------------------------- interactive sessions --

    def check_run(self, run_id: str, scope: Scope = TRUSTED) -> str:
        """The run a call is for: the caller's run when empty; refuses a malformed or foreign one.

        A bound caller (a run's token) acts for its run only, whatever the request
        says; the state dir's shared agent token never acts for a run opened with
        OpenRun, and on a per-run-token evaluator for no run at all.
        """
        if run_id and not _RUN_ID_RE.match(run_id):
            raise InvalidArgumentError(
                "run_id must be 1-64 characters of letters, digits, '.', '_' or '-'"
            )
        if scope.access is Access.RUN:
            if run_id and run_id != scope.run_id:
                if self.config.run_id is not None:
                    raise PermissionDeniedError(
                        f"this evaluator only accepts run {self.config.run_id!r}"
                    )
                raise PermissionDeniedError(
                    f"this token acts for run {scope.run_id!r} only; leave run_id empty or "
                    "name that run"
                )
            return scope.run_id
        if scope.access is Access.NO_RUN:
            raise PermissionDeniedError(NO_RUN_MESSAGE)
        run = self._check_run(run_id)
        if scope.access is Access.ANY_RUN and self.runs.known(run):
            raise PermissionDeniedError(
                f"run {run!r} was opened with OpenRun: only the token issued for it acts for it"
            )
        return run

    def visible(self, scope: Scope, run_id: str) -> bool:
        """Whether a caller may see a job or session of ``run_id`` ("" for run-less sessions)."""
        if scope.access is Access.TRUSTED:
            return True
        if scope.access is Access.RUN:
            return run_id == scope.run_id
        if scope.access is Access.ANY_RUN:
            return not self.runs.known(run_id)
        return run_id == ""

    def submission_root(self, run: str, rel_path: str = "") -> Path | None:
        """Where the run's SubmitBatchEval paths start (``run`` already checked).

        A run opened with OpenRun submits from its own ``VOLUME/<run_id>/`` only, so
        no run can snapshot another's files; other runs (an evaluator bound to one
        run, the single-tenant mode) from the volume root, but never from inside a
        directory of a run opened with OpenRun.
        """
        opened = self.runs.get(run)
        if opened is not None:
            return opened.submission_dir
        first = next((p for p in PurePosixPath(rel_path).parts if p != "."), "")
        if first and self.runs.known(first):
            raise PermissionDeniedError(
                f"{first!r} is the submission directory of another run; submit your own files"
            )
        return self.config.submission_volume

    # ----------------------------------------------------------------- runs --

    def open_run(self, run_id: str, task_id: str) -> OpenedRun:
        """Register a run of a shared evaluator: its own agent token and submission directory."""
        if self.config.run_id is not None:
            raise FailedPreconditionError(
                f"this evaluator is bound to run {self.config.run_id!r} (--run-id): its agent "
                "uses the agent.token of its state dir; OpenRun is for shared evaluators"
            )
        if not run_id:
            raise InvalidArgumentError("run_id is required: the harness chooses the run id")
        run = self._check_run(run_id)
        task = self.task(task_id)
        if (
            self.store.latest_for_run(run) is not None
            or self.store.events(run)
            or self.sessions.count(run)
        ):
            raise FailedPreconditionError(
                f"run {run!r} was used on this evaluator before; run ids are single use "
                "(the run's hidden seeds derive from it): choose a new one"
            )
        return self.runs.open(run, task.id, self.config.submission_volume)

    def close_run(self, run_id: str) -> RunClosed:
        """End a run: revoke its token first (no new calls), close its sessions, cancel
        its unfinished jobs.

        On an evaluator bound to the run (``config.run_id``) there is no run token to
        revoke: its agent token is the state dir's ``agent.token``, the evaluator's
        only agent credential, and stays valid (stop the evaluator to end it); the
        run's sessions and jobs end as on a shared evaluator.
        """
        if not run_id:
            raise InvalidArgumentError("run_id is required")
        run = self._check_run(run_id)
        if self.config.run_id is None:
            self.runs.close(run)
        sessions = self.sessions.close_run(run, "the run was closed")
        jobs = self.cancel_run(run, "the run was closed before the job finished")
        return RunClosed(sessions_closed=sessions, jobs_cancelled=len(jobs))

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
        run = self._check_run(run_id)
        ids = self.store.cancel_run(run, reason)
        # The runner drops its attempt first: a read of a snapshot deleted below then
        # fails as a consequence of the drop, never as an infrastructure failure.
        self.runner.cancel(ids)
        for job_id in ids:
            job = self.store.get(job_id)
            if job is None:
                continue
            self._event(
                job.run_id,
                self.spec(job.task_id),
                "result",
                {"job_id": job_id, "state": JobState.CANCELLED.value, "reason": reason},
            )
            shutil.rmtree(self.state.snapshots / job_id, ignore_errors=True)
        if ids:
            log.info("run %s: cancelled %d unfinished job(s)", run, len(ids))
        return ids

    def reap_expired(self) -> list[str]:
        """Requeue the jobs whose lease expired: their evaluator died or hung.

        Only this evaluator's run's when it is bound to one. An eval session's job
        is failed instead (its envs died with the process; :func:`.eval_record.
        fail_interrupted`). Returns the ids requeued.
        """
        expired = self.store.requeue_expired(
            run_id=self.config.run_id,
            fail_tokens=(EVAL_SESSION_TOKEN,),
            fail_reason=(
                "the evaluator running the eval session stopped during it; this run cannot "
                "be scored"
            ),
        )
        if expired.requeued:
            log.warning(
                "requeued %d job(s) whose evaluator stopped renewing its lease (it died or "
                "hung): %s",
                len(expired.requeued),
                ", ".join(expired.requeued),
            )
            self.runner.wake()
        fail_interrupted(self, expired.failed)
        return expired.requeued

    def hidden_seeds(self, task: TaskSpec, run_id: str) -> list[HiddenSeed]:
        """The run's hidden episode seeds; their values never leave the evaluator."""
        return derive_seeds(task.eval.base_seeds, run_id, self._secret)

    def event(
        self,
        run_id: str,
        task: TaskSpec,
        kind: str,
        payload: dict[str, Any],
        *,
        held_job: str | None = None,
    ) -> bool:
        """Sign and store a run event (for the runner and the session modules; see
        :meth:`_event`)."""
        return self._event(run_id, task, kind, payload, held_job=held_job)

    # --------------------------------------------------------------- events --

    def _event(
        self,
        run_id: str,
        task: TaskSpec,
        kind: str,
        payload: dict[str, Any],
        *,
        held_job: str | None = None,
    ) -> bool:
        """Sign and store the run's next evaluator event; returns whether it was stored.

        A run's first two events are fixed: ``evaluator_key`` (the public key)
        then ``seed_commitment`` (SHA-256 of the secret and one commitment per
        hidden seed of the run), so every later event is checkable against them.
        ``held_job``: store it only while this process holds that job (a job's
        own events; one it lost must not get more).
        """
        with self._event_lock:
            if not self.store.events(run_id):
                seeds = derive_seeds(task.eval.base_seeds, run_id, self._secret)
                preamble: list[tuple[str, dict[str, Any]]] = [
                    (
                        KEY_EVENT_KIND,
                        {**self.signer.key_event_payload(), "evaluator_version": __version__},
                    ),
                    (
                        COMMITMENT_EVENT_KIND,
                        {
                            "task_id": task.id,
                            "secret_sha256": self.secret_sha256,
                            "seed_commitments": [s.commitment for s in seeds],
                        },
                    ),
                ]
                for k, p in preamble:
                    self._store_signed(run_id, k, p)
            return self._store_signed(run_id, kind, payload, held_job)

    def rejection_event(
        self, run_id: str, task: TaskSpec, job_id: str, exc: SubmissionRejected
    ) -> None:
        """The signed record that a submission broke a rule (which file, which rule)."""
        self._event(
            run_id,
            task,
            "validation",
            {
                "job_id": job_id,
                "passed": False,
                "file": exc.file,
                "rule": exc.rule,
                "reason": str(exc),
            },
        )

    def _store_signed(
        self, run_id: str, kind: str, payload: dict[str, Any], held_job: str | None = None
    ) -> bool:
        return self.store.append_event(
            run_id,
            lambda seq: self.signer.sign_event(run_id, kind, payload, seq).model_dump_json(),
            held_job=held_job,
        )

    # --------------------------------------------------------------- submit --

    def submit(
        self,
        task_id: str,
        run_id: str,
        rel_path: str,
        client_token: str,
        scope: Scope = TRUSTED,
    ) -> tuple[JobRecord, bool]:
        task = self.task(task_id)
        if task.mode not in (TaskMode.BATCH, TaskMode.TASK_CONFIG) or task.contract is None:
            raise FailedPreconditionError(f"task {task.id} is not a batch task")
        run = self.check_run(run_id, scope)
        if not _TOKEN_RE.match(client_token):
            raise InvalidArgumentError(
                "client_token must be 1-128 printable ASCII characters (an idempotency key)"
            )
        existing = self.store.by_token(run, client_token)
        if existing is not None:
            return existing, True
        limit = self._submission_limit(task.id)
        free = self.config.free_infra_failures_per_run
        if self.store.quota_used(run, free) >= limit:
            raise ResourceExhaustedError(
                f"run {run} has used its {limit} submissions (limit: max_submissions; "
                f"infrastructure-failed jobs count too beyond the first {free})"
            )
        volume = self.submission_root(run, rel_path)
        if volume is None:
            raise FailedPreconditionError("this evaluator has no submission volume configured")
        staging = self.state.snapshots / f"staging-{uuid.uuid4().hex}"
        try:
            files = snapshot_submission(volume, rel_path, task.contract, staging)
        except OSError as exc:
            # the volume or the evaluator's disk, not the submission (rules raise
            # SubmissionRejected); no job is created, so the agent may retry
            shutil.rmtree(staging, ignore_errors=True)
            log.error("cannot snapshot a submission of run %s: %s", run, exc)
            raise FailedPreconditionError(
                f"the evaluator cannot snapshot submissions right now ({exc.strerror}); "
                "this is not a rejection, retry later"
            ) from None
        except SubmissionRejected as exc:
            shutil.rmtree(staging, ignore_errors=True)
            job, dedup = self.store.create(
                run_id=run,
                task_id=task.id,
                client_token=client_token,
                episodes_total=task.eval.evaluated_episodes,
                files={},
                state=JobState.REJECTED,
                failure_reason=str(exc),
            )
            if not dedup:
                self._event(run, task, "submission_received", {"job_id": job.job_id, "files": {}})
                self.rejection_event(run, task, job.job_id, exc)
            return job, dedup
        job, dedup = self.store.create(
            run_id=run,
            task_id=task.id,
            client_token=client_token,
            episodes_total=task.eval.evaluated_episodes,
            files={f.name: f.sha256 for f in files},
        )
        if dedup:
            shutil.rmtree(staging, ignore_errors=True)
            return job, True
        staging.rename(self.state.snapshots / job.job_id)
        self._event(
            run,
            task,
            "submission_received",
            {"job_id": job.job_id, "task_id": task.id, "files": job.files},
        )
        self.runner.wake()
        return job, False

    def _submission_limit(self, task_id: str) -> int:
        if self.config.max_submissions_per_run is not None:
            return self.config.max_submissions_per_run
        entry = self.registry.manifest_entry(task_id)
        return entry.compute_budget.max_submissions if entry is not None else 3
