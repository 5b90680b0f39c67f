"""Kind-specific settings: a task may set only those its kind reads, and each kind's own rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ale_robotics.tasks import TaskSpec, default_registry


def _doc(task_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(default_registry().entry(task_id).raw)
    return doc


def test_threads_are_read_by_the_native_kind_only() -> None:
    doc = _doc("td3-hopper-v1")
    doc["eval"]["threads"] = 4
    with pytest.raises(
        ValueError, match=r"eval\.threads applies only to eval\.backend 'mujoco_rollout'"
    ):
        TaskSpec.model_validate(doc)
    doc["eval"]["threads"] = 1  # the default, written out: nothing is ignored
    TaskSpec.model_validate(doc)
    native = _doc("td3-halfcheetah-vec-v1")
    native["eval"]["threads"] = 4
    assert TaskSpec.model_validate(native).eval.threads == 4


def test_the_native_kind_refuses_an_env_it_cannot_step() -> None:
    doc = _doc("tdmpc2-cheetah-run-v1")  # dm_control: no Gymnasium MuJoCo family
    doc["eval"]["backend"] = "mujoco_rollout"
    with pytest.raises(ValueError, match=r"no vectorized step for ale_robotics\.envs:DMC-cheetah"):
        TaskSpec.model_validate(doc)


def test_planning_settings_go_with_a_planning_kind_only() -> None:
    planner = _doc("panda-planner-config-v1")
    hopper = _doc("td3-hopper-v1")
    hopper["planning"] = planner["planning"]
    with pytest.raises(
        ValueError, match=r"'planning' settings go with eval\.backend 'edmp' or 'planner'"
    ):
        TaskSpec.model_validate(hopper)
    planner.pop("planning")
    with pytest.raises(ValueError, match=r"'planning' settings go with eval\.backend"):
        TaskSpec.model_validate(planner)


def test_a_batch_policy_task_declares_its_policy() -> None:
    doc = _doc("td3-inverted-pendulum-v2")
    doc.pop("policy")
    with pytest.raises(ValueError, match="rolls out the task's 'policy' network"):
        TaskSpec.model_validate(doc)
