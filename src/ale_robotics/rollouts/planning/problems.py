"""The two planning kinds' work: load the submitted configuration, run the problems.

:class:`~.kind.PlannerKind` and :class:`~.kind.EdmpKind` delegate to
:func:`load_planning_artifact` (their ``load_artifact``, so the runner and
``ale-robotics audit`` load the same thing) and :func:`planning_episodes`
(their ``run_shard``, inside a rollout worker).

* ``planner`` (``panda-planner-config-v1``, batch): the artifact is
  ``planner.yaml``; each problem is planned by OMPL in planner processes the
  worker owns (:mod:`.planner_procs`).
* ``edmp`` (``edmp-v1``, read-from-task-config): the artifact is the agent's
  copy of the task's planner settings, ``edmp_config.yaml``, which the harness
  submits when the agent exits; each problem is planned by
  :func:`~ale_robotics.planning.edmp.generate_trajectory` in the worker itself.

The validated configuration travels to the workers as canonical JSON in a
``uint8`` array under :data:`CONFIG_KEY`, the same picklable channel that
carries policy weights, so the pipeline needs no second artifact type. Each
problem is generated from its hidden seed, planned, timed (``planning_time``,
seconds, by the evaluator, on the task's ``planning.clock``: wall-clock seconds in
the v1 tasks, the planning process's CPU seconds from v2, with the wall-clock
seconds beside them as ``planning_wall_time``) and validated densely by
:func:`~ale_robotics.planning.validate.validate_path`. Problems run one at a
time in one shard (``eval.envs_per_shard >= eval.episodes``), so
that measured times are not shared with another problem of the same job.
The task's shape (mode, contract, metrics, one shard) is checked when the task
config is parsed, by the kind's ``check_task`` (:mod:`.kind`).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.planning.cpu_clock import Clock, cpu_seconds
from ale_robotics.planning.edmp import generate_trajectory
from ale_robotics.planning.edmp_config import EdmpConfig, load_edmp_config
from ale_robotics.planning.planner_config import PlannerConfig, load_planner_config
from ale_robotics.planning.planner_procs import PlannerPool
from ale_robotics.planning.scenes import Problem, generate_problem
from ale_robotics.planning.validate import PathVerdict, validate_path
from ale_robotics.planning.world import CollisionWorld
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["CONFIG_KEY", "load_planning_artifact", "planning_episodes"]

CONFIG_KEY = "planning_config"


def load_planning_artifact(
    files: list[SnapshotFile], task: TaskSpec
) -> dict[str, npt.NDArray[np.uint8]]:
    """Validate the planning task's YAML file; raises ``SubmissionRejected`` naming the key."""
    assert task.contract is not None and task.planning is not None
    contract_file = task.contract.files[0]
    name = next(iter(contract_file.names))
    f = next((x for x in files if x.name == name), None)
    if f is None:
        raise SubmissionRejected(name, "required file", f"{name} is not in the submission")
    cfg: Any
    if task.planning.planner is not None:
        cfg = load_planner_config(f.path, f.name, contract_file.max_bytes, task.planning.planner)
    else:
        assert task.planning.edmp is not None
        cfg = load_edmp_config(f.path, f.name, contract_file.max_bytes, task.planning.edmp)
    blob = json.dumps(cfg.model_dump(mode="json"), sort_keys=True).encode("utf-8")
    return {CONFIG_KEY: np.frombuffer(blob, dtype=np.uint8).copy()}


@functools.cache
def _world() -> CollisionWorld:
    """The worker's PyBullet world, made once per process (loading the robot takes ~0.2 s)."""
    return CollisionWorld()


@dataclass(frozen=True)
class _Planned:
    """A runner's answer: the path (None: no solution) and its times."""

    path: npt.NDArray[np.float64] | None
    time_s: float
    """On the task's clock: what ``planning_time`` averages."""
    wall_s: float | None
    """Wall-clock seconds beside CPU seconds (``cpu`` clock); None on the wall clock."""


def _times(clock: Clock, wall_s: float, cpu_s: float | None) -> tuple[float, float | None]:
    """(planning time, wall time beside it) of an attempt measured on both clocks."""
    if clock == "cpu":
        assert cpu_s is not None
        return cpu_s, wall_s
    return wall_s, None


def _outcome(index: int, verdict: PathVerdict, planned: _Planned) -> EpisodeOutcome:
    return EpisodeOutcome(
        index,
        1.0 if verdict.success else 0.0,
        verdict.states_checked,
        verdict.success,
        success=verdict.success,
        collided=verdict.collided,
        planning_time_s=planned.time_s,
        planning_wall_time_s=planned.wall_s,
        reason=verdict.reason,
    )


def planning_episodes(
    task: TaskSpec,
    artifact: dict[str, npt.NDArray[Any]],
    seeds: Sequence[tuple[int, int]],
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
) -> list[EpisodeOutcome]:
    """One planning problem per ``(index, hidden seed)``: generate, plan, time, validate."""
    planning = task.planning
    assert planning is not None
    doc = json.loads(bytes(np.asarray(artifact[CONFIG_KEY], dtype=np.uint8)).decode("utf-8"))
    world = _world()
    plan = _planner_runner(task, doc) if planning.planner is not None else _edmp_runner(task, doc)
    out: list[EpisodeOutcome] = []
    try:
        for index, seed in seeds:
            problem = generate_problem(int(seed), planning.scene_types, world)
            planned = plan(problem, int(seed))
            verdict = validate_path(
                world,
                problem,
                planned.path,
                resolution=planning.validation_resolution_rad,
                goal_tolerance=planning.goal_tolerance_rad,
                max_states=planning.max_validated_states,
            )
            outcome = _outcome(index, verdict, planned)
            out.append(outcome)
            if on_episode is not None:
                on_episode(outcome)
    finally:
        close = getattr(plan, "close", None)
        if close is not None:
            close()
    return out


_Runner = Callable[[Problem, int], _Planned]


class _PlannerRunner:
    """OMPL in planner processes; ``close`` ends them when the shard is done."""

    def __init__(self, task: TaskSpec, doc: dict[str, Any]) -> None:
        assert task.planning is not None and task.planning.planner is not None
        self.cfg = PlannerConfig.model_validate(doc)
        self.grace = task.planning.planner.grace_s
        self.clock = task.planning.clock
        self.pool = PlannerPool(self.cfg.parallel_processes)
        self.pool.warm_up()

    def __call__(self, problem: Problem, seed: int) -> _Planned:
        attempt = self.pool.solve(problem, self.cfg, self.grace, self.clock)
        path = attempt.path if attempt.solved else None
        return _Planned(path, *_times(self.clock, attempt.elapsed_s, attempt.cpu_s))

    def close(self) -> None:
        self.pool.close()


def _planner_runner(task: TaskSpec, doc: dict[str, Any]) -> _PlannerRunner:
    return _PlannerRunner(task, doc)


def _edmp_runner(task: TaskSpec, doc: dict[str, Any]) -> _Runner:
    """EDMP in the worker itself, timed around the generator (its CPU time: the worker's,
    every thread, so numpy's own threads count too)."""
    assert task.planning is not None
    cfg, clock = EdmpConfig.model_validate(doc), task.planning.clock

    def run(problem: Problem, seed: int) -> _Planned:
        t0, c0 = time.perf_counter(), cpu_seconds()
        path = generate_trajectory(problem, cfg, seed)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        return _Planned(path, *_times(clock, wall, cpu))

    return run
