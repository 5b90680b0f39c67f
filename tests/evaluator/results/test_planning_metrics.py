"""Planning tasks timed in CPU seconds (issue 27): their results carry only their declared
metrics (no return or episode length, which a planning problem does not have), with the
wall-clock seconds beside the CPU seconds; the v1 tasks and every other kind are unchanged."""

from __future__ import annotations

import json

import pytest

from ale_robotics.errors import ConfigError
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.results.metrics import HOST_TIMED, task_metrics
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import PlanningOutcomes
from ale_robotics.tasks import Registry, default_registry


def _problems(wall: bool) -> list[EpisodeOutcome]:
    return [
        EpisodeOutcome(
            i,
            float(i % 2),
            100 + i,
            i % 2 == 1,
            success=i % 2 == 1,
            collided=i == 0,
            planning_time_s=0.1 * (i + 1),
            planning_wall_time_s=0.3 * (i + 1) if wall else None,
            reason="",
        )
        for i in range(4)
    ]


@pytest.mark.parametrize("task_id", ["panda-planner-config-v2", "edmp-v2"])
def test_cpu_timed_planning_tasks_report_only_their_declared_metrics(task_id: str) -> None:
    task = default_registry().get(task_id)
    metrics = task_metrics(_problems(wall=True), task)
    assert set(metrics) == {"planning_time", "planning_wall_time", "success_rate", "collision_rate"}
    assert metrics["planning_time"] == pytest.approx(0.25)
    assert metrics["planning_wall_time"] == pytest.approx(0.75)
    assert (metrics["success_rate"], metrics["collision_rate"]) == (0.5, 0.25)
    assert {"planning_time", "planning_wall_time"} <= HOST_TIMED  # the audit re-measures them


@pytest.mark.parametrize("task_id", ["panda-planner-config-v1", "edmp-v1"])
def test_the_v1_planning_tasks_keep_the_metrics_their_recorded_results_have(task_id: str) -> None:
    task = default_registry().get(task_id)
    outcomes = _problems(wall=False)
    metrics = task_metrics(outcomes, task)
    assert metrics == summarize(outcomes, [m.name for m in task.metrics])
    assert {"mean_return", "std_return", "mean_episode_length"} <= set(metrics)
    assert "planning_wall_time" not in metrics


def test_other_kinds_keep_the_generic_metrics() -> None:
    task = default_registry().get("td3-hopper-v1")
    outcomes = [EpisodeOutcome(0, 10.0, 5, True), EpisodeOutcome(1, 20.0, 7, False)]
    assert task_metrics(outcomes, task) == summarize(outcomes, [m.name for m in task.metrics])
    assert task_metrics(outcomes, task) == {
        "mean_return": 15.0,
        "std_return": 5.0,
        "mean_episode_length": 6.0,
    }


def test_the_signed_planning_record_carries_the_wall_time_and_old_records_still_read() -> None:
    record = PlanningOutcomes.from_episodes("planner", _problems(wall=True))
    back = record.episode_outcomes()
    assert [o.planning_wall_time_s for o in back] == pytest.approx([0.3, 0.6, 0.9, 1.2])
    old = json.loads(record.model_dump_json())
    for p in old["problems"]:
        del p["planning_wall_time_s"]
    assert PlanningOutcomes.model_validate(old).problems[0].planning_wall_time_s is None


def test_a_cpu_timed_planning_task_must_declare_the_wall_time_beside_it() -> None:
    data = json.loads(default_registry().entry("panda-planner-config-v2").raw)
    data["metrics"] = [m for m in data["metrics"] if m["name"] != "planning_wall_time"]
    with pytest.raises(ConfigError, match="planning_wall_time"):
        Registry({"t.json": json.dumps(data).encode()}).get(data["id"])
