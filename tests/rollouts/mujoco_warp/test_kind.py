"""The ``mujoco_warp`` kind as the evaluator sees it (no engine needed): its rules and plan."""

from __future__ import annotations

import json

import pytest
from warp_tasks import WARP_TASK, family_task

from ale_robotics.engines import engine_of_kind
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES
from ale_robotics.rollouts.mujoco_warp import FAMILY_GYM_IDS
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskSpec, default_registry


def _doc(**changes: object) -> dict[str, object]:
    doc: dict[str, object] = json.loads(default_registry().entry(WARP_TASK).raw)
    doc.update(changes)
    return doc


def test_it_steps_exactly_the_families() -> None:
    assert set(FAMILIES) == FAMILY_GYM_IDS


def test_the_bundled_task_runs_in_the_mujoco_warp_engine() -> None:
    task = default_registry().get(WARP_TASK)
    kind = get_kind(task.eval.rollout)
    assert kind.name == "mujoco_warp" and kind.engine == "mujoco-warp"
    engine = engine_of_kind(kind.name)
    assert engine is not None and engine.python == "3.11"
    assert kind.worker_needs is not None and kind.worker_needs.max_workers == 1


def test_same_contract_and_hidden_seeds_as_the_c_kind() -> None:
    """A family's Warp task and its C twin differ in their backend only: the same episodes
    (every hidden seed its episode's env seed) on the same shards."""
    warp, c = family_task("Hopper-v5", 20), family_task("Hopper-v5", 20, "mujoco_rollout")
    assert warp.contract == c.contract and warp.policy == c.policy
    seeds = derive_seeds(warp.eval.base_seeds, "run-x", bytes(range(32)))
    assert get_kind("mujoco_warp").episode_plan(warp, seeds) == get_kind(
        "mujoco_rollout"
    ).episode_plan(c, seeds)


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"mode": "interactive"}, "runs batch tasks only"),
        ({"env": {"gym_id": "Ant-v5", "kwargs": {}, "max_episode_steps": 1000}}, "no Warp step"),
    ],
)
def test_tasks_it_cannot_run_are_refused(changes: dict[str, object], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        TaskSpec.model_validate(_doc(**changes))


def test_checkpoints_are_refused_they_run_in_the_evaluators_process() -> None:
    walker = json.loads(default_registry().entry("td3-walker2d-repro-v2").raw)
    assert walker["training"]["checkpoints"]
    walker["eval"]["backend"] = "mujoco_warp"
    walker["eval"].pop("threads", None)
    with pytest.raises(ValueError, match=r"training\.checkpoints are measured in the evaluator"):
        TaskSpec.model_validate(walker)
