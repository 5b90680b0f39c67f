"""The operator's settings of one evaluator process, and the two things built from them alone.

A module of its own so that every service of the evaluator (:mod:`.batch.jobs`,
:mod:`.batch.runner`, :mod:`.sessions.manager`, ...) can be typed against the settings without
importing :mod:`.core`, the composition root that builds and wires them; and so
that the executor and the job store are built by one function each, whoever
builds them (:class:`~.core.Evaluator`; the audit re-runs on the same executor
factory).
"""

from __future__ import annotations

from pathlib import Path

from ale_robotics.evaluator.execution import Executor, WorkerLimits, check_executor, make_executor
from ale_robotics.evaluator.state.directory import StateDir
from ale_robotics.evaluator.store import DEFAULT_LEASE_S, JobStore, open_store, redacted
from ale_robotics.evaluator.store.identity import StoreIdentity, check_identity

__all__ = ["EvaluatorConfig", "open_executor", "open_job_store"]


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
        practice_without_run: bool = False,
        max_infra_retries_per_run: int = 3,
        free_infra_failures_per_run: int = 1,
        job_lease_s: float = DEFAULT_LEASE_S,
        store_url: str | None = None,
        executor: str = "local",
        ray_address: str | None = None,
        video_episodes: int = 3,
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
        (each job also at most ``max_attempts`` attempts); see :mod:`.batch.runner`."""
        self.free_infra_failures_per_run = free_infra_failures_per_run
        """Infrastructure-failed jobs of a run that do not count against its submission
        quota; each one beyond counts (:meth:`.store.JobQueue.quota_used`)."""
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
        if video_episodes < 0:
            raise ValueError(f"video_episodes must be >= 0, got {video_episodes}")
        self.video_episodes = video_episodes
        """The most hidden-seed episodes of a run this evaluator renders videos of, after its
        official result (:mod:`.videos`; ``--videos``); 0: it keeps nothing for videos and
        renders none."""
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
        whose runs each have their own max_sessions (None:
        ``sessions.limits.DEFAULT_MAX_SESSIONS_TOTAL``, never below the per-run limit)."""
        self.per_run_tokens = per_run_tokens
        """Without run_id: True (``evaluator serve`` without ``--run-id``) makes each run's
        agent use the token OpenRun issued for it, and the state dir's agent.token reach no
        run (GetSpec and run-less practice sessions only). False keeps the single-tenant
        behaviour of in-process fixtures: agent.token acts for any run not opened with
        OpenRun. Ignored with run_id (that evaluator's agent token is minted for the run)."""
        if practice_without_run and (run_id is not None or not per_run_tokens):
            raise ValueError(
                "practice_without_run is an option of a shared evaluator with per-run tokens "
                "(evaluator serve without --run-id)"
            )
        self.practice_without_run = practice_without_run
        """``evaluator serve --allow-practice-without-run``: the operator's own token,
        ``STATE_DIR/practice.token`` (never the agent.token, never given to an agent), opens
        practice sessions outside any run; they count against no run's budget. False (the
        default): no token practises outside a run (PERMISSION_DENIED says how to enable it)."""
        """A smoke run (``ale-robotics run --episodes N``): every task is evaluated on its
        first N episodes only, and every result says so (:mod:`.batch.smoke`). None: official."""


def open_executor(config: EvaluatorConfig) -> Executor:
    """The rollout executor ``config`` asks for (kind, workers, limits, Ray address)."""
    return make_executor(
        config.executor,
        workers=config.workers,
        limits=config.worker_limits,
        ray_address=config.ray_address,
    )


def open_job_store(
    config: EvaluatorConfig, state: StateDir, identity: StoreIdentity | None = None
) -> JobStore:
    """The job store ``config`` names, or the SQLite file of the state dir by default.

    ``identity``: this evaluator's (its secret's and key's fingerprints): recorded in the
    store by the first evaluator to open it; a store another state dir recorded is closed
    again and refused (:class:`~.store.identity.StoreOwnedElsewhere`), before anything
    is claimed from it.
    """
    where = config.store_url or state.db_path
    store = open_store(where, lease_s=config.job_lease_s)
    if identity is not None:
        try:
            check_identity(redacted(str(where)), store.bind_identity(identity), identity)
        except BaseException:
            store.close()
            raise
    return store
