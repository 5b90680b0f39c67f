"""One OMPL planning attempt with PyBullet collision checking (runs in a planner process).

Uses the ``ompl`` 2.x Python bindings (nanobind; ``from ompl import base as ob,
geometric as og``): a 7-D ``RealVectorStateSpace`` bounded by the joint limits,
a Python state validity checker calling
:meth:`~ale_robotics.planning.world.CollisionWorld.in_collision`, and the
chosen planner in a ``SimpleSetup``. A fresh ``SimpleSetup`` and planner are made
per problem (re-using one across planners crashed the interpreter in our checks).

The planner stops at the first exact solution, at its time limit, or when the
process that owns it asks it to (the other of two racing processes won), all
through one OMPL termination condition. ``elapsed_s`` covers setup, solving and
simplification, measured here with ``time.perf_counter``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.planning.planner_config import GOAL_BIAS_PLANNERS, RANGE_PLANNERS, PlannerConfig
from ale_robotics.planning.robot import DOF, JOINT_LOWER, JOINT_UPPER
from ale_robotics.planning.scenes import Problem
from ale_robotics.planning.world import CollisionWorld

__all__ = ["PlanAttempt", "plan_with_ompl", "quiet_ompl"]


@dataclass(frozen=True)
class PlanAttempt:
    """What a planner process answers for one problem."""

    solved: bool
    """An exact solution was found (the path may still fail the evaluator's validation)."""
    path: npt.NDArray[np.float64] | None
    elapsed_s: float
    status: str


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


def plan_with_ompl(
    world: CollisionWorld,
    problem: Problem,
    cfg: PlannerConfig,
    cancelled: Callable[[], bool] = lambda: False,
) -> PlanAttempt:
    """Plan ``problem`` (whose scene ``world`` must hold) with the configured planner."""
    from ompl import base as ob
    from ompl import geometric as og

    t0 = time.perf_counter()
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
    ptc = ob.plannerOrTerminationCondition(
        ob.plannerOrTerminationCondition(
            ob.timedPlannerTerminationCondition(cfg.time_limit_s),
            ob.exactSolnPlannerTerminationCondition(ss.getProblemDefinition()),
        ),
        ob.PlannerTerminationCondition(cancelled),
    )
    status = ss.solve(ptc)
    if not ss.haveExactSolutionPath():
        return PlanAttempt(False, None, time.perf_counter() - t0, status.asString())
    if cfg.simplification_time_s > 0:
        ss.simplifySolution(cfg.simplification_time_s)
    path = ss.getSolutionPath()
    waypoints = np.array([[s[i] for i in range(DOF)] for s in path.getStates()], dtype=np.float64)
    return PlanAttempt(True, waypoints, time.perf_counter() - t0, status.asString())
