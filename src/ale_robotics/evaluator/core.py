"""The evaluator's composition root: builds its services and wires them together.

:class:`Evaluator` owns the state dir (secret, keys) and builds, from the
operator's :class:`~.config.EvaluatorConfig`, each service with the
collaborators it uses and nothing more:

* :class:`~.state.ledger.RunLedger`: the secret, the signing key, a run's hidden
  seeds and signed events (the only holder of the secret);
* :class:`~.results.builder.ResultBuilder`: every ``EvalResult`` and ``result``
  event payload;
* :class:`~.batch.runner.JobRunner`: a single thread taking queued jobs one at a time
  (validation, the native pipeline on hidden seeds, the stored result);
* :class:`~.runs.checkpoints.CheckpointService`: a run's checkpoints, snapshotted and
  signed as they arrive (SubmitCheckpoint), evaluated in-process when the run's
  result is built;
* :class:`~.videos.VideoService`: a job's evaluation videos, rendered when the harness
  asks once the result is recorded, from what its :class:`~.videos.VideoStore` kept (a
  batch job's frozen files, an eval session's actions);
* :class:`~.batch.jobs.JobService`, :class:`~.sessions.manager.SessionManager`,
  :class:`~.runs.service.RunService`: what the gRPC servicer (:mod:`.server.servicer`)
  translates requests to, with :class:`~.runs.access.RunAccess` (who acts for which
  run) and :class:`~.catalog.TaskCatalog` (the tasks served).

No service holds the evaluator: each gets what it uses, so none can reach
another's state through it. The methods left here are thin delegations for
in-process callers (the harness's tests, audits).

Several evaluators may share one state dir (every ``ale-robotics run`` embeds
one on the default dir): each holds the jobs it runs under a lease (:mod:`.store`),
so starting one never disturbs another's jobs. An evaluator embedded in a run
(``config.run_id``) claims, requeues and cancels only that run's jobs.
"""

from __future__ import annotations

from typing import Any

from ale_robotics.evaluator.batch.jobs import JobService
from ale_robotics.evaluator.batch.leases import LeaseReaper
from ale_robotics.evaluator.batch.runner import JobRunner
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.config import EvaluatorConfig, open_executor, open_job_store
from ale_robotics.evaluator.execution import Executor
from ale_robotics.evaluator.observe import Observers, observed_queue
from ale_robotics.evaluator.results.builder import ResultBuilder
from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.checkpoints import CheckpointReceipt, CheckpointService
from ale_robotics.evaluator.runs.registry import TRUSTED, OpenedRun, RunClosed, RunRegistry, Scope
from ale_robotics.evaluator.runs.service import RunService
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.sessions.eval_record import EvalRecords
from ale_robotics.evaluator.sessions.manager import SessionManager
from ale_robotics.evaluator.state.directory import StateDir
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.evaluator.store.identity import StoreIdentity
from ale_robotics.evaluator.videos import open_videos
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.registry import Registry
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import EvaluatorSigner, secret_commitment

__all__ = ["Evaluator", "EvaluatorConfig"]


def _identity(config: EvaluatorConfig, secret: bytes, signer: EvaluatorSigner) -> StoreIdentity:
    """This evaluator's identity for its store (:mod:`.store.identity`): replicas share one
    state dir (secret, key), and a store first opened with another is refused."""
    return StoreIdentity.of(
        secret_commitment(secret), signer.public_key_hex, str(config.state_dir.resolve())
    )


class Evaluator:
    """One evaluator process's services, built from its config and task registry.

    ``executor``: the rollout executor, when the caller already made the one
    ``config`` asks for (:func:`~.config.open_executor`) to start its workers before
    the evaluator exists (the harness: :mod:`ale_robotics.harness.prestart`); it is
    then this evaluator's, shut down by :meth:`stop`. None: made here.
    """

    def __init__(
        self, config: EvaluatorConfig, registry: Registry, *, executor: Executor | None = None
    ) -> None:
        if executor is not None and executor.kind != config.executor:
            raise ValueError(f"a {executor.kind!r} executor for a {config.executor!r} config")
        self.config = config
        self.registry = registry
        self.state = StateDir(config.state_dir)
        secret = self.state.secret()  # handed to the ledger only
        self.signer = EvaluatorSigner.load_or_create(self.state.signing_key_path)
        self.store = open_job_store(config, self.state, _identity(config, secret, self.signer))
        self.ledger = RunLedger(self.store, self.signer, secret)
        self.pool = executor if executor is not None else open_executor(config)
        # The runs opened with OpenRun and each run's practice steps live in the store
        # (every replica sees them at once).
        self.runs = RunRegistry(self.store)
        self.training = TrainingLedger(self.store)
        self.tasks = TaskCatalog(
            registry, task_id=config.task_id, smoke_episodes=config.smoke_episodes
        )
        self.access = RunAccess(
            self.runs, bound_run=config.run_id, submission_volume=config.submission_volume
        )
        self.checkpoints = CheckpointService(
            self.ledger, self.tasks, self.access, self.training, snapshots=self.state.snapshots
        )
        # a result first evaluates the run's checkpoints received so far (settle)
        self.results = ResultBuilder(
            self.tasks,
            self.ledger.secret_sha256,
            events=self.ledger.events,
            training=self.training,
            settle=self.checkpoints.settle,
        )
        self.videos = open_videos(self.state.root, config.video_episodes, self.ledger, self.tasks)
        vs = self.videos.store  # what videos are made from: taped sessions, kept submissions
        records = EvalRecords(self.store, self.ledger, self.results, self.training, self.tasks, vs)
        reaper = LeaseReaper(self.store, records, bound_run=config.run_id, state=self.state)
        self.observers = Observers()  # who counts what the services report (.observe)
        self.runner = JobRunner(
            observed_queue(self.store, self.observers),
            self.pool,
            self.ledger,
            self.results,
            self.tasks.spec,
            self.state.snapshots,
            reaper.reap,
            config,
            run_id=config.run_id,
        )
        if config.task_id is not None:
            registry.get(config.task_id)  # fail fast on an unknown task
        self.sessions = SessionManager(
            self.access,
            records,
            self.training,
            self.tasks.training_budget,
            config,
        )
        self.jobs = JobService(
            self.store,
            self.ledger,
            self.results,
            self.tasks,
            self.access,
            self.runner,
            config,
            snapshots=self.state.snapshots,
            videos=vs,
        )
        self.run_service = RunService(
            self.runs,
            self.access,
            self.tasks,
            self.ledger,
            self.jobs,
            self.sessions,
            submission_volume=config.submission_volume,
            videos=vs,
        )
        # Jobs a dead process left RUNNING, once their lease has run out (the runner
        # looks again every third of the lease); never a live process's.
        self.jobs.reap_expired()

    # ------------------------------------------------------------ lifecycle --

    def start(self) -> None:
        self.pool.on_shard = self.observers.shard_finished  # for metrics (.observe)
        self.sessions.on_steps = self.observers.agent_steps
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
        if self.config.run_id is not None:  # the run is over with its embedded evaluator
            self.videos.store.remove_run(self.config.run_id)

    # ------------------------------------------- delegations for in-process callers --

    @property
    def _secret(self) -> bytes:
        """The state dir's hidden-seed secret, read afresh from it.

        Only for tests that check the secret never leaks (no service but the
        ledger holds it, and the ledger gives it to nobody).
        """
        return self.state.secret()

    @property
    def secret_sha256(self) -> str:
        """The public commitment to the secret (:attr:`.RunLedger.secret_sha256`)."""
        return self.ledger.secret_sha256

    def task(self, task_id: str) -> TaskSpec:
        """The task a request names (empty: the one served): :meth:`.TaskCatalog.task`."""
        return self.tasks.task(task_id)

    def hidden_seeds(self, task: TaskSpec, run_id: str) -> list[HiddenSeed]:
        """The run's hidden episode seeds; their values never leave the evaluator."""
        return self.ledger.hidden_seeds(task, run_id)

    def event(
        self,
        run_id: str,
        task: TaskSpec,
        kind: str,
        payload: dict[str, Any],
        *,
        held_job: str | None = None,
    ) -> bool:
        """Sign and store a run event: :meth:`.RunLedger.event`."""
        return self.ledger.event(run_id, task, kind, payload, held_job=held_job)

    def open_run(self, run_id: str, task_id: str) -> OpenedRun:
        """Register a run of a shared evaluator: :meth:`.RunService.open_run`."""
        return self.run_service.open_run(run_id, task_id)

    def close_run(self, run_id: str) -> RunClosed:
        """End a run (token, sessions, jobs): :meth:`.RunService.close_run`."""
        return self.run_service.close_run(run_id)

    def submit(
        self,
        task_id: str,
        run_id: str,
        rel_path: str,
        client_token: str,
        scope: Scope = TRUSTED,
    ) -> tuple[JobRecord, bool]:
        """Snapshot and queue a submission: :meth:`.JobService.submit`."""
        return self.jobs.submit(task_id, run_id, rel_path, client_token, scope)

    def submit_checkpoint(
        self,
        task_id: str,
        run_id: str,
        rel_path: str,
        client_token: str,
        scope: Scope = TRUSTED,
    ) -> CheckpointReceipt:
        """Snapshot and sign a checkpoint as received: :meth:`.CheckpointService.submit`."""
        return self.checkpoints.submit(task_id, run_id, rel_path, client_token, scope)

    def job(self, job_id: str, run_id: str, scope: Scope = TRUSTED) -> JobRecord:
        """A job by id, or the run's newest: :meth:`.JobService.job`."""
        return self.jobs.job(job_id, run_id, scope)

    def result(self, job_id: str, run_id: str, scope: Scope = TRUSTED) -> EvalResult:
        """A terminal job's result with the run's events: :meth:`.JobService.result`."""
        return self.jobs.result(job_id, run_id, scope)

    def cancel_run(self, run_id: str, reason: str = "the run was cancelled") -> list[str]:
        """End the run's unfinished jobs CANCELLED: :meth:`.JobService.cancel_run`."""
        return self.jobs.cancel_run(run_id, reason)
