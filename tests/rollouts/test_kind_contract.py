"""One contract suite, run over every registered rollout kind (docs/architecture.md#layering-rules).

Whatever a kind does inside, the evaluator relies on the same promises: it loads under its
entry-point name, its config rules accept the bundled tasks of its kind and refuse a task
shaped for another kind, a smoke run is a prefix of the official run, the episode plan has
as many episodes as the protocol says, and its outcome record survives the result's JSON.
A kind added later (its folder and one entry point) is checked by this file unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind, kind_names
from ale_robotics.model.outcomes import BatchOutcomes, episode_outcomes
from ale_robotics.model.result import EvalResult
from ale_robotics.model.rollout_kind import RolloutKind
from ale_robotics.rollouts.policy import PolicyRolloutKind
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskMode, TaskSpec, default_registry
from ale_robotics.tasks.spec import KIND_SETTINGS

REGISTRY = default_registry()
KINDS = kind_names()
SECRET = bytes(range(32))
BATCH = [e for e in REGISTRY if e.spec.mode is not TaskMode.INTERACTIVE]
"""Tasks whose episodes a kind runs from a submission (interactive ones are driven live)."""


def _tasks_of(name: str) -> list[TaskSpec]:
    return [e.spec for e in REGISTRY if e.spec.eval.rollout == name]


def _shape(kind: RolloutKind) -> str:
    """Kinds that read the same task shape: every policy kind runs a policy task."""
    return "policy" if isinstance(kind, PolicyRolloutKind) else kind.name


def _as_kind(raw: bytes, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(raw)
    doc["eval"]["backend"] = name
    return doc


def test_the_bundled_kinds_are_registered() -> None:
    assert {"gymnasium", "mujoco_rollout", "replay", "planner", "edmp"} <= set(KINDS)
    every = {e.spec.eval.rollout for e in REGISTRY}
    assert every <= set(KINDS)


@pytest.mark.parametrize("name", KINDS)
def test_loads_under_its_entry_point_name(name: str) -> None:
    kind = get_kind(name)
    assert isinstance(kind, RolloutKind) and kind.name == name
    assert get_kind(name) is kind  # one instance per process


@pytest.mark.parametrize("name", KINDS)
def test_reads_only_known_settings(name: str) -> None:
    assert get_kind(name).settings <= set(KIND_SETTINGS)


@pytest.mark.parametrize("name", KINDS)
def test_accepts_the_registered_tasks_of_its_kind(name: str) -> None:
    kind = get_kind(name)
    for task in _tasks_of(name):
        kind.check_task(task)  # raises on a task it cannot run


@pytest.mark.parametrize("name", KINDS)
def test_refuses_a_task_shaped_for_another_kind(name: str) -> None:
    kind = get_kind(name)
    others = [e for e in BATCH if _shape(get_kind(e.spec.eval.rollout)) != _shape(kind)]
    assert others, "every kind has a bundled task of another shape to refuse"
    for entry in others:
        with pytest.raises(ValueError, match=entry.spec.id):
            TaskSpec.model_validate(_as_kind(entry.raw, name))


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("episodes", [1, 2])
def test_a_smoke_run_is_a_prefix_of_the_official_run(name: str, episodes: int) -> None:
    kind = get_kind(name)
    for task in _tasks_of(name):
        small = kind.smoke_task(task, episodes)
        TaskSpec.model_validate_json(small.model_dump_json())  # still a valid task of its kind
        assert small.eval.rollout == name
        base = small.eval.base_seeds
        assert base == task.eval.base_seeds[: len(base)]
        assert small.eval.evaluated_episodes == min(episodes, task.eval.evaluated_episodes)
        full_plan = kind.episode_plan(task, derive_seeds(task.eval.base_seeds, "run-p", SECRET))
        plan = kind.episode_plan(small, derive_seeds(base, "run-p", SECRET))
        assert set(plan) <= set(full_plan)  # the same episodes, never a different sample


@pytest.mark.parametrize("name", KINDS)
def test_the_episode_plan_has_the_protocol_s_episodes(name: str) -> None:
    kind = get_kind(name)
    for task in _tasks_of(name):
        plan = kind.episode_plan(task, derive_seeds(task.eval.base_seeds, "run-q", SECRET))
        assert len(plan) == task.eval.evaluated_episodes == kind.evaluated_episodes(task.eval)
        indices = [i for i, _ in plan]
        assert indices == sorted(set(indices))
        assert all(0 <= i < task.eval.episodes for i in indices)


@pytest.mark.parametrize("name", KINDS)
def test_the_outcome_record_survives_the_result_json(name: str) -> None:
    kind = get_kind(name)
    outcomes = [
        EpisodeOutcome(
            i,
            float(i),
            10 + i,
            i % 2 == 0,
            success=i % 2 == 0,
            final_distance=0.01 * i,
            collided=i == 1,
            planning_time_s=0.1 * i,
            reason="" if i % 2 == 0 else "collision",
        )
        for i in range(3)
    ]
    record = kind.outcome_record([100, 101, 102], outcomes)
    assert record.backend == name
    assert [e.index for e in record.entries()] == [0, 1, 2]
    again = pydantic.TypeAdapter[Any](BatchOutcomes).validate_python(record.model_dump(mode="json"))
    assert again == record
    base = {
        "job_id": "j",
        "run_id": "r",
        "task_id": "t",
        "task_config_sha256": "0" * 64,
        "state": "SUCCEEDED",
        "secret_sha256": "1" * 64,
        "evaluator_version": "0",
    }
    result = EvalResult.model_validate_json(EvalResult(**base, outcomes=record).model_dump_json())
    assert result.outcomes == record
    assert [o.index for o in episode_outcomes(record)] == [0, 1, 2]
