"""Planning problems timed on the task's clock (issue 27): on v2 (``planning.clock: cpu``)
``planning_time_s`` is CPU seconds with the wall seconds beside it, for the OMPL planner in
its planner process and for EDMP in the worker; on v1 it is the wall clock, as recorded."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ale_robotics.planning.planner_config import PlannerConfig
from ale_robotics.rollouts.planning import CONFIG_KEY, planning_episodes
from ale_robotics.tasks import default_registry

SEEDS = [(0, 9601), (1, 9603)]
"""Two quick problems (tens of milliseconds each for RRTConnect here)."""


def _artifact(doc: Any) -> dict[str, Any]:
    blob = json.dumps(doc, sort_keys=True).encode("utf-8")
    return {CONFIG_KEY: np.frombuffer(blob, dtype=np.uint8).copy()}


PLANNER = PlannerConfig(planner="RRTConnect", time_limit_s=5.0, collision_check_resolution=0.001)


@pytest.mark.parametrize("task_id", ["panda-planner-config-v2", "panda-planner-config-v1"])
def test_planner_problems_are_timed_on_the_tasks_clock(task_id: str) -> None:
    task = default_registry().get(task_id)
    out = planning_episodes(task, _artifact(PLANNER.model_dump(mode="json")), SEEDS)
    assert [o.success for o in out] == [True, True]
    for o in out:
        assert o.planning_time_s is not None and 0 < o.planning_time_s < 5.0
        if task_id.endswith("-v2"):  # one thread planning: CPU time within the wall time
            assert o.planning_wall_time_s is not None
            assert o.planning_time_s <= o.planning_wall_time_s + 0.01
        else:
            assert o.planning_wall_time_s is None


def test_edmp_problems_on_the_cpu_clock_carry_both_times() -> None:
    task = default_registry().get("edmp-v2")
    assert task.planning is not None and task.planning.edmp is not None
    defaults = task.planning.edmp.defaults.model_copy(update={"steps": 5})
    (o,) = planning_episodes(task, _artifact(defaults.model_dump(mode="json")), SEEDS[:1])
    assert o.planning_time_s is not None and o.planning_wall_time_s is not None
    assert o.planning_time_s > 0 and o.planning_wall_time_s > 0
