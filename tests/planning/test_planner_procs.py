"""Planner processes: an overrunning planner is killed at its time limit plus the grace, a
crashed one is replaced, two racing planners stop at the first solution, and real OMPL plans."""

from __future__ import annotations

import time

import numpy as np
import planning_helpers

from ale_robotics.planning.planner_config import PlannerConfig
from ale_robotics.planning.planner_procs import PlannerPool
from ale_robotics.planning.scenes import SCENE_TYPES, Problem, generate_problem
from ale_robotics.planning.world import CollisionWorld

CFG = PlannerConfig(planner="RRTConnect", time_limit_s=0.5)
Q = tuple(np.zeros(7).tolist())


def _problem(kind: str) -> Problem:
    return Problem(kind, (), Q, Q)  # type: ignore[arg-type]


def test_a_hanging_planner_is_killed_and_replaced() -> None:
    pool = PlannerPool(1, target=planning_helpers.misbehaving)
    try:
        t0 = time.monotonic()
        hung = pool.solve(_problem("dresser"), CFG, grace_s=0.5)
        assert time.monotonic() - t0 < 5
        assert not hung.solved and hung.status == "killed past its time limit"
        assert 1.0 <= hung.elapsed_s < 3.0  # the time it was given, charged to the problem
        crashed = pool.solve(_problem("cubby"), CFG, grace_s=0.5)
        assert not crashed.solved and crashed.status == "crashed"
        fine = pool.solve(_problem("tabletop"), CFG, grace_s=0.5)  # a fresh process answers
        assert fine.solved and fine.path is not None
    finally:
        pool.close()


def test_the_first_solution_wins_and_the_other_process_stops() -> None:
    pool = PlannerPool(2, target=planning_helpers.racing)
    try:
        pool.warm_up()
        t0 = time.monotonic()
        for _ in range(2):  # the loser is reusable: its cancel flag is cleared each time
            won = pool.solve(
                _problem("tabletop"), CFG.model_copy(update={"time_limit_s": 30.0}), 1.0
            )
            assert won.solved and won.status == "won"
        assert time.monotonic() - t0 < 5
    finally:
        pool.close()


def test_ompl_plans_a_generated_problem(world: CollisionWorld) -> None:
    problem = generate_problem(3, SCENE_TYPES, world)
    cfg = PlannerConfig(planner="RRTConnect", time_limit_s=5.0, collision_check_resolution=0.002)
    pool = PlannerPool(1)
    try:
        attempt = pool.solve(problem, cfg, grace_s=2.0)
    finally:
        pool.close()
    assert attempt.solved and attempt.path is not None, attempt.status
    np.testing.assert_allclose(attempt.path[0], problem.start)
    np.testing.assert_allclose(attempt.path[-1], problem.goal, atol=1e-6)
    assert 0 < attempt.elapsed_s < 5.0
