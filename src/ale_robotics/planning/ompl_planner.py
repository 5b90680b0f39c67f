"""One OMPL planning attempt with PyBullet collision checking (runs in a planner process).

Uses the ``ompl`` 2.x Python bindings (nanobind; ``from ompl import base as ob,
geometric as og``): a 7-D ``RealVectorStateSpace`` bounded by the joint limits,
a Python state validity checker calling
:meth:`~ale_robotics.planning.world.CollisionWorld.in_collision`, and the
chosen planner in a ``SimpleSetup``. A fresh ``SimpleSetup`` and planner are made
per problem (re-using one across planners crashed the interpreter in our checks).

The planner stops at the first exact solution, at its time limit, or when the
process that owns it asks it to (the other of two racing processes won), all
through one OMPL termination condition. The time limit is on the task's clock
(``planning.clock``): ``wall`` (``panda-planner-config-v1``) is OMPL's own timed
condition; ``cpu`` (from v2) is this process's CPU time, checked by a Python
callable on every planner iteration (:class:`~.cpu_clock.CpuBudget`), with a
generous wall-clock ceiling (:func:`~.cpu_clock.wall_backstop_s`) past which the
attempt reports :data:`STARVED` (the host, not the planner, failed). Both times
are measured, covering setup, solving and simplification: ``elapsed_s`` with
``time.perf_counter`` and ``cpu_s`` with ``time.process_time``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.planning.cpu_clock import Clock, CpuBudget, cpu_seconds, wall_backstop_s
from ale_robotics.planning.planner_config import GOAL_BIAS_PLANNERS, RANGE_PLANNERS, PlannerConfig
from ale_robotics.planning.robot import DOF, JOINT_LOWER, JOINT_UPPER
from ale_robotics.planning.scenes import Problem
from ale_robotics.planning.world import CollisionWorld

__all__ = ["STARVED", "PlanAttempt", "plan_with_ompl", "quiet_ompl"]

STARVED = "stopped by the wall-clock backstop before its CPU time limit"
"""The status of an attempt the host starved (``cpu`` clock): an infrastructure failure."""


@dataclass(frozen=True)
class PlanAttempt:
    """What a planner process answers for one problem."""

    solved: bool
    """An exact solution was found (the path may still fail the evaluator's validation)."""
    path: npt.NDArray[np.float64] | None
    elapsed_s: float
    """Wall-clock seconds of the attempt."""
    status: str
    cpu_s: float | None = None
    """CPU seconds of the planner process during the attempt (None: not measured)."""


def quiet_ompl(seed: int | None = None) -> None:
    """Silence OMPL's console log and, once per process, seed its random streams."""
    from ompl import util as ou

    ou.setLogLevel(ou.LOG_NONE)
    if seed is not None:
        ou.RNG.setSeed(seed)


def _planner(og: Any, si: Any, cfg: PlannerConfig) -> Any:
    planner = getattr(og, cfg.planner)(si)
    if cfg.range is not None and cfg.planner in RANGE_PLANNERS:
        planner.setRange(cfg.range)
    if cfg.goal_bias is not None and cfg.planner in GOAL_BIAS_PLANNERS:
        planner.setGoalBias(cfg.goal_bias)
    return planner


def _simple_setup(world: CollisionWorld, problem: Problem, cfg: PlannerConfig) -> Any:
    """A fresh ``SimpleSetup`` for ``problem`` with the configured planner."""
    from ompl import base as ob
    from ompl import geometric as og

    space = ob.RealVectorStateSpace(DOF)
    bounds = ob.RealVectorBounds(DOF)
    for i in range(DOF):
        bounds.setLow(i, JOINT_LOWER[i])
        bounds.setHigh(i, JOINT_UPPER[i])
    space.setBounds(bounds)
    si = ob.SpaceInformation(space)
    in_collision = world.in_collision

    def valid(state: Any) -> bool:
        return not in_collision([state[i] for i in range(DOF)])

    si.setStateValidityChecker(valid)
    si.setStateValidityCheckingResolution(cfg.collision_check_resolution)
    si.setup()
    ss = og.SimpleSetup(si)
    start, goal = si.allocState(), si.allocState()
    for i in range(DOF):
        start[i] = problem.start[i]
        goal[i] = problem.goal[i]
    ss.setStartAndGoalStates(start, goal, 1e-6)
    ss.setPlanner(_planner(og, si, cfg))
    ss.setup()
    return ss


def _termination(
    ss: Any, cfg: PlannerConfig, clock: Clock, cancelled: Callable[[], bool], c0: float
) -> Any:
    """Stop at the first exact solution, when ``cancelled()``, or at the time limit: OMPL's
    timed condition (``wall``), or this process's CPU time since ``c0`` (``cpu``) with the
    wall-clock ceiling beside it."""
    from ompl import base as ob

    exact = ob.exactSolnPlannerTerminationCondition(ss.getProblemDefinition())
    if clock == "cpu":
        ceiling = ob.timedPlannerTerminationCondition(wall_backstop_s(cfg.time_limit_s))
        return ob.plannerOrTerminationCondition(
            ob.plannerOrTerminationCondition(exact, ceiling),
            ob.PlannerTerminationCondition(CpuBudget(cfg.time_limit_s, cancelled, now=c0)),
        )
    return ob.plannerOrTerminationCondition(
        ob.plannerOrTerminationCondition(
            ob.timedPlannerTerminationCondition(cfg.time_limit_s), exact
        ),
        ob.PlannerTerminationCondition(cancelled),
    )


def plan_with_ompl(
    world: CollisionWorld,
    problem: Problem,
    cfg: PlannerConfig,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Clock = "wall",
) -> PlanAttempt:
    """Plan ``problem`` (whose scene ``world`` must hold) with the configured planner,
    stopping at ``cfg.time_limit_s`` on ``clock``."""
    from ompl import base as ob

    t0, c0 = time.perf_counter(), cpu_seconds()
    ss = _simple_setup(world, problem, cfg)
    status = ss.solve(_termination(ss, cfg, clock, cancelled, c0)).asString()
    if not ss.haveExactSolutionPath():
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        # OMPL's timed condition runs on its own clock, ending up to ~1 ms early on ours
        starved = wall >= 0.95 * wall_backstop_s(cfg.time_limit_s) and cpu < cfg.time_limit_s
        if clock == "cpu" and starved and not cancelled():
            status = STARVED
        return PlanAttempt(False, None, wall, status, cpu)
    if cfg.simplification_time_s > 0 and clock == "cpu":
        ss.simplifySolution(
            ob.PlannerTerminationCondition(CpuBudget(cfg.simplification_time_s, cancelled))
        )
    elif cfg.simplification_time_s > 0:
        ss.simplifySolution(cfg.simplification_time_s)
    path = ss.getSolutionPath()
    waypoints = np.array([[s[i] for i in range(DOF)] for s in path.getStates()], dtype=np.float64)
    return PlanAttempt(True, waypoints, time.perf_counter() - t0, status, cpu_seconds() - c0)
