"""Planner processes: an overrunning planner is killed at its time limit plus the grace, a
crashed one is replaced, two racing planners stop at the first solution, and real OMPL plans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
        took = time.monotonic() - t0  # a hung planner never returns: the kill ended it
        assert not hung.solved and hung.status == "killed past its time limit"
        # the time it was given (limit + grace), charged to the problem, and no more than
        # the call took (on a busy host the kill comes later, and is charged as it came)
        assert 1.0 <= hung.elapsed_s <= took
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
        for _ in range(2):  # the loser is reusable: its cancel flag is cleared each time
            t0 = time.monotonic()
            won = pool.solve(
                _problem("tabletop"), CFG.model_copy(update={"time_limit_s": 30.0}), 1.0
            )
            assert won.solved and won.status == "won"
            # the loser runs to its 30 s limit: the call ended before, so it was stopped
            assert time.monotonic() - t0 < 30.0
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


_PARENT = """
import sys
import numpy as np
import planning_helpers
from ale_robotics.planning.planner_config import PlannerConfig
from ale_robotics.planning.planner_procs import PlannerPool
from ale_robotics.planning.scenes import Problem

pool = PlannerPool(1, target=planning_helpers.misbehaving)
pool.warm_up()
print(pool._children[0].proc.pid, flush=True)
q = tuple(np.zeros(7).tolist())
# a planner that sleeps an hour: it never reads its pipe's EOF
pool.solve(Problem("dresser", (), q, q), PlannerConfig(planner="RRTConnect", time_limit_s=120), 1)
"""


def test_a_planner_dies_with_its_worker_even_mid_problem() -> None:
    """A rollout worker SIGKILLed (or ending with its own parent, issue 31) while its
    planner is stuck in a problem leaves no planner process behind."""
    here = Path(__file__).resolve().parent
    path = os.pathsep.join(str(d) for d in (here, here.parent))
    worker = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert worker.stdout is not None
    planner = int(worker.stdout.readline())
    time.sleep(0.5)  # the problem is sent: the planner sleeps in it
    assert worker.poll() is None, "the worker stopped before it was killed"
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 5
    while _alive(planner) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(planner)
    if alive:
        os.kill(planner, signal.SIGKILL)  # never left behind, whatever the outcome
    assert not alive, "the planner outlived its worker"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
