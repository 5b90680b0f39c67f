"""The one place that builds an :class:`~.result.EvalResult` and the signed ``result`` event.

A job's official result and its signed ``result`` event say the same thing
twice (the audit checks one against the other), so both are built here,
together, for each way a job ends:

* a batch job that was measured (:meth:`ResultBuilder.batch_success`) or whose
  submission broke the evaluation (:meth:`ResultBuilder.batch_failure`);
* a run's eval session (:meth:`ResultBuilder.eval_session`);
* a job that ended without a measurement: cancelled, past its deadline, failed
  by the infrastructure (only the event: :meth:`ResultBuilder.cancelled`,
  :meth:`~ResultBuilder.timed_out`, :meth:`~ResultBuilder.infrastructure_failure`),
  and the result read back for such a job (:meth:`ResultBuilder.empty`).

Every result carries the same provenance (task config hash, the secret's
commitment, versions, smoke run), filled in here only.

A batch result of a task whose simulator is the evaluator's (``training.simulator``
'evaluator') also carries what the evaluator observed of the run's training when
the result was built: its practice-step count (:attr:`.result.EvalResult.training`,
signed in the ``result`` event too) and, for a task with checkpoints, the learning
curve of the run's signed ``checkpoint`` events (:attr:`.result.EvalResult.learning_curve`;
the events themselves are what the audit checks it against) and the checkpoints that
could not be measured (``checkpoint_failed``: :attr:`.result.EvalResult.failed_checkpoints`).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from ale_robotics import __version__
from ale_robotics.engines import engine_used
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.execution.blas import numpy_blas
from ale_robotics.evaluator.results.intervals import metric_intervals
from ale_robotics.evaluator.runs.checkpoints import (
    checkpoint_settings,
    failed_points,
    learning_curve,
)
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import batch_outcomes
from ale_robotics.model.result import (
    CurvePoint,
    EpisodeRecord,
    EvalResult,
    FailedCheckpoint,
    Floor,
    HostInfo,
    HostLoad,
    Timings,
    TrainingUsage,
)
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.spec import TaskMode, TaskSpec

__all__ = [
    "ResultBuilder",
    "Verdict",
    "host_info",
    "result_payload",
    "session_outcomes",
    "simulator_versions",
]


@dataclass(frozen=True)
class Verdict:
    """A measured job's official result and the payload of its signed ``result`` event."""

    result: EvalResult
    payload: dict[str, Any]


def result_payload(
    job_id: str,
    state: JobState,
    *,
    failure_source: FailureSource | None = None,
    reason: str | None = None,
    metrics: dict[str, float] | None = None,
    episode_returns: list[float] | None = None,
    outcomes: dict[str, Any] | None = None,
    smoke_run: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    floor: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload of a ``result`` event: the keys given, always in this order.

    The order is the one the evaluator has always signed, so payloads of old and
    new runs compare key for key (the newest, ``training``, ``floor`` then ``engine``,
    come last).
    """
    payload: dict[str, Any] = {"job_id": job_id, "state": state.value}
    if failure_source is not None:
        payload["failure_source"] = failure_source.value
    optional: tuple[tuple[str, Any], ...] = (
        ("reason", reason),
        ("metrics", metrics),
        ("episode_returns", episode_returns),
        ("outcomes", outcomes),
        ("smoke_run", smoke_run),
        ("training", training),
        ("floor", floor),
        ("engine", engine),
    )
    payload.update((key, value) for key, value in optional if value is not None)
    return payload


class ResultBuilder:
    """Builds results with this evaluator's provenance; holds the secret's commitment only.

    ``events`` (a run's stored signed events, :meth:`.state.ledger.RunLedger.events`) and
    ``training`` (the practice-step counts) give batch results their learning curve
    and training usage (module docstring); without them, batch results carry neither.
    ``settle`` (:meth:`.runs.checkpoints.CheckpointService.settle`) is called before the
    curve is read: it evaluates the checkpoints received so far (SubmitCheckpoint only
    takes them), so that the result holds every one.
    """

    def __init__(
        self,
        tasks: TaskCatalog,
        secret_sha256: str,
        *,
        events: Callable[[str], list[dict[str, Any]]] | None = None,
        training: TrainingLedger | None = None,
        settle: Callable[[str, TaskSpec], None] | None = None,
    ) -> None:
        self._tasks = tasks
        self._secret_sha256 = secret_sha256
        self._events = events
        self._training = training
        self._settle = settle
        self._load_start: dict[str, list[float]] = {}

    def job_started(self, job_id: str) -> None:
        """Note the host's load as job ``job_id`` starts, for its result's ``host.load``."""
        self._load_start[job_id] = load_average()

    def _checkpoints(
        self, run_id: str, task: TaskSpec
    ) -> tuple[list[CurvePoint], list[FailedCheckpoint]]:
        """The run's signed checkpoints now, once all are evaluated, for a task with
        checkpoints: the measured ones (the curve) and the failed ones; else [], []."""
        if self._events is None or checkpoint_settings(task) is None:
            return [], []
        if self._settle is not None:
            self._settle(run_id, task)
        events = self._events(run_id)
        return learning_curve(events), failed_points(events)

    def _batch_training(self, run_id: str, task: TaskSpec) -> TrainingUsage | None:
        """The run's practice steps now, for a batch task whose simulator is the
        evaluator's (the only batch tasks whose training the evaluator sees); else None."""
        if self._training is None or task.mode is TaskMode.INTERACTIVE:
            return None
        if not task.simulator_in_evaluator:
            return None
        return self._training.usage(run_id, self._tasks.training_budget(task))

    # ------------------------------------------------------ measured results --

    def batch_success(
        self,
        job: JobRecord,
        task: TaskSpec,
        *,
        seeds: Sequence[HiddenSeed],
        outcomes: Sequence[EpisodeOutcome],
        metrics: dict[str, float],
        evidence_files: dict[str, str],
        tensor_shapes: dict[str, list[int]],
        wall_s: float,
        env_steps: int,
        workers: int,
        floor: tuple[Floor | None, str] = (None, ""),
    ) -> Verdict:
        """A batch job that ran every episode: metrics, episodes, typed outcomes, evidence,
        what the evaluator observed of the run's training (module docstring), and the
        floor (:mod:`.floor`: the floor measured, or None and why)."""
        training = self._batch_training(job.run_id, task)
        curve, failed = self._checkpoints(job.run_id, task)
        engine = engine_used(task)
        result = EvalResult(
            job_id=job.job_id,
            run_id=job.run_id,
            task_id=task.id,
            task_config_sha256=self._tasks.config_sha256(task.id),
            state=JobState.SUCCEEDED,
            submission_files=job.files,
            metrics=metrics,
            intervals=metric_intervals(outcomes, metrics),
            episodes=[
                EpisodeRecord(
                    index=o.index,
                    seed_commitment=seeds[o.index].commitment,
                    episode_return=o.ret,
                    length=o.length,
                    terminated=o.terminated,
                    success=o.success,
                )
                for o in outcomes
            ],
            outcomes=batch_outcomes(task.eval.rollout, task.eval.base_seeds, outcomes),
            evidence_files=evidence_files,
            tensor_shapes=tensor_shapes,
            secret_sha256=self._secret_sha256,
            evaluator_version=__version__,
            simulator_versions=simulator_versions(task.simulator.package),
            host=host_info(self._load_start.pop(job.job_id, None)),
            timings=_timings(wall_s, env_steps, workers),
            attempts=job.attempts,
            smoke_run=self._tasks.smoke_run(task.id),
            training=training,
            learning_curve=curve,
            failed_checkpoints=failed,
            floor=floor[0],
            floor_note=floor[1],
            engine=engine,
        )
        assert result.outcomes is not None
        payload = result_payload(
            job.job_id,
            JobState.SUCCEEDED,
            metrics=metrics,
            episode_returns=[o.ret for o in outcomes],
            # the per-episode outcomes are signed too: the audit checks result.json's
            # against them
            outcomes=result.outcomes.model_dump(mode="json"),
            smoke_run=_smoke(result),
            training=None if training is None else training.model_dump(mode="json"),
            floor=_floor_payload(floor[0]),
            engine=None if engine is None else engine.model_dump(mode="json"),
        )
        return Verdict(result, payload)

    def batch_failure(self, job: JobRecord, task: TaskSpec, reason: str) -> Verdict:
        """A batch job FAILED by its submission (a policy fault, a non-finite metric).

        ``reason`` (which episode, which step) is for the harness only: it goes
        into the result and the signed event, never into the agent's job status.
        """
        training = self._batch_training(job.run_id, task)
        curve, failed = self._checkpoints(job.run_id, task)
        engine = engine_used(task)
        result = EvalResult(
            job_id=job.job_id,
            run_id=job.run_id,
            task_id=task.id,
            task_config_sha256=self._tasks.config_sha256(task.id),
            state=JobState.FAILED,
            failure_source=FailureSource.SUBMISSION,
            failure_reason=reason,
            submission_files=job.files,
            engine=engine,
            secret_sha256=self._secret_sha256,
            evaluator_version=__version__,
            simulator_versions=simulator_versions(task.simulator.package),
            host=host_info(self._load_start.pop(job.job_id, None)),
            attempts=job.attempts,
            smoke_run=self._tasks.smoke_run(task.id),
            training=training,
            learning_curve=curve,
            failed_checkpoints=failed,
        )
        payload = result_payload(
            job.job_id,
            JobState.FAILED,
            failure_source=FailureSource.SUBMISSION,
            reason=reason,
            training=None if training is None else training.model_dump(mode="json"),
            engine=None if engine is None else engine.model_dump(mode="json"),
        )
        return Verdict(result, payload)

    def eval_session(
        self,
        *,
        job_id: str,
        run_id: str,
        task: TaskSpec,
        episodes: list[EpisodeRecord],
        metrics: dict[str, float],
        failure: str | None,
        infrastructure: bool,
        wall_s: float,
        env_steps: int,
        training: TrainingUsage,
        floor: tuple[Floor | None, str] = (None, ""),
    ) -> Verdict:
        """A run's eval session: SUCCEEDED with metrics (and its floor, :mod:`.floor`), or
        FAILED with why and whose fault (``infrastructure``: the evaluator's, else the
        submission's)."""
        source = FailureSource.NONE
        if failure:
            source = FailureSource.INFRASTRUCTURE if infrastructure else FailureSource.SUBMISSION
        state = JobState.FAILED if failure else JobState.SUCCEEDED
        result = EvalResult(
            job_id=job_id,
            run_id=run_id,
            task_id=task.id,
            task_config_sha256=self._tasks.config_sha256(task.id),
            state=state,
            failure_source=source,
            failure_reason=failure or "",
            metrics=metrics,
            intervals={} if failure else metric_intervals(session_outcomes(episodes), metrics),
            episodes=episodes,
            secret_sha256=self._secret_sha256,
            evaluator_version=__version__,
            simulator_versions=simulator_versions(task.simulator.package),
            host=host_info(self._load_start.pop(job_id, None)),
            timings=_timings(wall_s, env_steps, 1),
            smoke_run=self._tasks.smoke_run(task.id),
            training=training,
            floor=None if failure else floor[0],
            floor_note="" if failure else floor[1],
        )
        payload = result_payload(
            job_id,
            state,
            failure_source=source if failure else None,
            reason=failure or None,
            metrics=None if failure else metrics,
            episode_returns=[r.episode_return for r in episodes],
            smoke_run=_smoke(result),
            floor=_floor_payload(result.floor),
        )
        return Verdict(result, payload)

    # ------------------------------------------------- ended, not measured --

    def empty(self, job: JobRecord) -> EvalResult:
        """The result of a terminal job that stored none (rejected, cancelled, timed out,
        failed by the infrastructure): its state and why, with the usual provenance."""
        return EvalResult(
            job_id=job.job_id,
            run_id=job.run_id,
            task_id=job.task_id,
            task_config_sha256=self._tasks.config_sha256(job.task_id),
            state=job.state,
            failure_source=job.failure_source,
            failure_reason=job.failure_reason,
            submission_files=job.files,
            secret_sha256=self._secret_sha256,
            evaluator_version=__version__,
            simulator_versions=simulator_versions(self._tasks.simulator_package(job.task_id)),
            attempts=job.attempts,
            smoke_run=self._tasks.smoke_run(job.task_id),
        )

    @staticmethod
    def cancelled(job_id: str, reason: str) -> dict[str, Any]:
        """The ``result`` payload of a job cancelled before it ended (its run ended early)."""
        return result_payload(job_id, JobState.CANCELLED, reason=reason)

    @staticmethod
    def timed_out(job_id: str, reason: str) -> dict[str, Any]:
        """The ``result`` payload of a job past its deadline (the infrastructure's fault)."""
        return result_payload(job_id, JobState.TIMED_OUT, reason=reason)

    @staticmethod
    def infrastructure_failure(job_id: str) -> dict[str, Any]:
        """The ``result`` payload of a job the infrastructure failed for good: the state
        and whose fault, as it has always been signed (the job status has the reason)."""
        return result_payload(job_id, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE)


def _timings(wall_s: float, env_steps: int, workers: int) -> Timings:
    return Timings(
        wall_s=wall_s,
        env_steps=env_steps,
        env_steps_per_s=env_steps / wall_s if wall_s > 0 else 0.0,
        workers=workers,
    )


def _floor_payload(floor: Floor | None) -> dict[str, Any] | None:
    """A floor as its signed event says it (None: no ``floor`` key)."""
    return None if floor is None else floor.model_dump(mode="json")


def _smoke(result: EvalResult) -> dict[str, Any] | None:
    return None if result.smoke_run is None else result.smoke_run.model_dump()


SIMULATOR_PACKAGES = ["mujoco", "gymnasium", "numpy", "pybullet", "ompl"]
"""Recorded in every EvalResult (with the task's own simulator package), installed or not."""


def simulator_versions(task_package: str) -> dict[str, str]:
    """The simulator stack's versions, for the result (``not installed`` where absent)."""
    return package_versions([*SIMULATOR_PACKAGES, task_package])


def package_versions(names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def load_average() -> list[float]:
    """The host's 1, 5 and 15 minute load averages, rounded to 0.01."""
    return [round(x, 2) for x in os.getloadavg()]


def host_info(load_start: list[float] | None = None) -> HostInfo:
    """This host, and its load now (and at ``load_start``, the job's start)."""
    return HostInfo(
        platform=platform.platform(),
        machine=platform.machine(),
        python=sys.version.split()[0],
        cpu_count=os.cpu_count() or 1,
        load=HostLoad(start=load_start, end=load_average()),
        blas=numpy_blas(),
    )


def session_outcomes(episodes: Sequence[EpisodeRecord]) -> list[EpisodeOutcome]:
    """An eval session's records as the outcomes its metrics were computed from."""
    return [
        EpisodeOutcome(r.index, r.episode_return, r.length, r.terminated, success=r.success)
        for r in episodes
    ]
