"""CPU-timed planning (issue 27): the CPU-time readings, OMPL stopped on CPU time rather than
wall time, and planner processes killed on their CPU time, a hung one on the time it had."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

import numpy as np
import pytest

from ale_robotics.planning import ompl_planner
from ale_robotics.planning.cpu_clock import (
    CpuBudget,
    cpu_seconds,
    process_cpu_seconds,
    process_stat,
    wall_backstop_s,
)
from ale_robotics.planning.ompl_planner import STARVED, plan_with_ompl
from ale_robotics.planning.planner_config import PlannerConfig
from ale_robotics.planning.planner_procs import PlannerPool, PlannerStarved
from ale_robotics.planning.scenes import Problem

Q0 = tuple(np.zeros(7).tolist())
Q1 = (0.5, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0)


def _burn(seconds: float) -> None:
    end = cpu_seconds() + seconds
    while cpu_seconds() < end:
        pass


def test_a_process_cpu_time_is_read_from_proc_and_none_once_it_is_gone() -> None:
    import planning_helpers

    _burn(0.3)
    mine = process_cpu_seconds(os.getpid())
    assert mine is not None and abs(mine - cpu_seconds()) < 0.05  # one tick is 10 ms
    proc = mp.get_context("spawn").Process(target=planning_helpers.spin)
    proc.start()
    try:
        time.sleep(1.5)  # start-up, then spinning
        first = process_cpu_seconds(proc.pid)
        assert first is not None
        later, deadline = first, time.monotonic() + 20  # however busy the host is
        while later - first < 0.1 and time.monotonic() < deadline:
            time.sleep(0.1)
            later = process_cpu_seconds(proc.pid) or 0.0
        assert later - first >= 0.1
        stat = process_stat(proc.pid)
        assert stat is not None and stat[1] == "R"  # spinning: running or waiting to
    finally:
        proc.kill()
        proc.join()
    assert process_cpu_seconds(proc.pid) is None and process_stat(proc.pid) is None


def test_the_cpu_budget_counts_cpu_time_not_sleep() -> None:
    budget = CpuBudget(0.1)
    time.sleep(0.3)  # asleep: no CPU used
    assert not budget()
    _burn(0.12)
    assert budget()
    stopped = CpuBudget(60.0, stop=lambda: True)
    assert stopped()


def test_the_wall_backstop_is_a_generous_multiple_of_the_budget() -> None:
    assert wall_backstop_s(1.0) == 60.0
    assert wall_backstop_s(12.0) == 120.0


class _Walls:
    """A world in which only the start and goal are free (the planner can never connect
    them) and each check sleeps: a planner that uses little CPU per wall second."""

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def in_collision(self, q: Any) -> bool:
        time.sleep(self.sleep_s)
        return not (np.allclose(q, Q0) or np.allclose(q, Q1))


def _unsolvable() -> Problem:
    return Problem("tabletop", (), Q0, Q1)


def test_ompl_stops_on_cpu_time_on_the_cpu_clock_and_on_wall_time_on_the_wall_clock() -> None:
    cfg = PlannerConfig(planner="RRTConnect", time_limit_s=0.2)
    world: Any = _Walls(0.0005)
    cpu = plan_with_ompl(world, _unsolvable(), cfg, clock="cpu")
    assert not cpu.solved and cpu.cpu_s is not None
    assert 0.2 <= cpu.cpu_s < 0.3
    assert cpu.elapsed_s > 2 * cpu.cpu_s  # mostly asleep: a wall clock would have stopped early
    wall = plan_with_ompl(world, _unsolvable(), cfg, clock="wall")
    assert not wall.solved and wall.cpu_s is not None
    assert wall.elapsed_s >= 0.19 and wall.cpu_s < 0.15  # OMPL's own clock: ~1 ms
    # stopped on the wall clock, before the CPU clock run (measured just above) stopped
    assert wall.elapsed_s < cpu.elapsed_s


def test_an_attempt_past_the_wall_ceiling_within_its_cpu_time_reports_starved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ompl_planner, "wall_backstop_s", lambda budget: 0.2)
    cfg = PlannerConfig(planner="RRTConnect", time_limit_s=5.0)
    world: Any = _Walls(0.001)
    attempt = plan_with_ompl(world, _unsolvable(), cfg, clock="cpu")
    assert not attempt.solved and attempt.status == STARVED
    # stopped by the 0.2 s backstop: its 5 s of CPU time take at least 5 s of wall time
    assert attempt.elapsed_s < cfg.time_limit_s


CFG = PlannerConfig(planner="RRTConnect", time_limit_s=0.5)


def _problem(kind: str, start: tuple[float, ...] = Q0) -> Problem:
    return Problem(kind, (), start, Q0)  # type: ignore[arg-type]


def test_planner_processes_are_killed_on_their_cpu_time_a_hung_one_on_the_time_it_had() -> None:
    import planning_helpers

    pool = PlannerPool(1, target=planning_helpers.misbehaving)
    try:
        t0 = time.monotonic()
        burning = pool.solve(_problem("merged_cubby"), CFG, grace_s=0.5, clock="cpu")
        took = time.monotonic() - t0  # a burning planner never returns: the kill ended it
        assert burning.status == "killed past its CPU time limit" and not burning.solved
        # limit + grace of CPU time charged; no more than the call's own wall time (one
        # thread), however late a busy host let the watcher kill it
        assert burning.cpu_s is not None and 1.0 <= burning.cpu_s <= took
        t0 = time.monotonic()
        hung = pool.solve(_problem("dresser"), CFG, grace_s=0.5, clock="cpu")
        took = time.monotonic() - t0
        assert hung.status.startswith("killed past its time limit without using the CPU")
        assert hung.cpu_s is not None and hung.cpu_s < 0.5 and 1.0 <= hung.elapsed_s <= took
        crashed = pool.solve(_problem("cubby"), CFG, grace_s=0.5, clock="cpu")
        assert crashed.status == "crashed"
        fine = pool.solve(_problem("tabletop"), CFG, grace_s=0.5, clock="cpu")
        assert fine.solved
        with pytest.raises(PlannerStarved, match="host is overloaded"):
            pool.solve(_problem("tabletop", start=(1.0,) * 7), CFG, grace_s=0.5, clock="cpu")
    finally:
        pool.close()
