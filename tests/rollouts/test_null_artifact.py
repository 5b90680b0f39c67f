"""Every kind's null submission (the floor's artifact) does nothing, in the contract's terms."""

from __future__ import annotations

import numpy as np
import pytest

from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.mlp import policy_for
from ale_robotics.tasks import TaskMode, default_registry

REG = default_registry()
BATCH = [t for t in REG.ids() if REG.get(t).mode is not TaskMode.INTERACTIVE]


@pytest.mark.parametrize("task_id", BATCH)
def test_null_artifact_matches_the_contract_and_does_nothing(task_id: str) -> None:
    task = REG.get(task_id)
    kind = get_kind(task.eval.rollout)
    null = kind.null_artifact(task)
    if task.eval.rollout in ("planner", "edmp"):
        assert null is None  # a configuration always plans: no floor
        return
    assert null is not None and task.contract is not None
    rules = {t.key: t for t in task.contract.tensors if t.key in null}
    assert set(rules) == set(null)
    for key, arr in null.items():
        assert list(arr.shape) == rules[key].shape and not arr.any()
    if task.policy is not None:
        assert kind.floor_policy == "zero_output"
        obs = np.random.default_rng(0).standard_normal((5, rules["l1.weight"].shape[1]))
        act = policy_for(
            task, null, np.full(rules[f"{task.policy.layer_names[-1]}.bias"].shape, 3.0)
        )
        assert not act(obs.astype(np.float32)).any()  # every step: the null action, 0
    elif task.eval.rollout == "isaaclab":  # RSL-RL's actor, all zero: its mean action is 0
        assert kind.floor_policy == "zero_output" and "mlp.4.bias" in null
    else:
        assert kind.floor_policy == "null_action"


def test_interactive_tasks_have_no_batch_null_artifact() -> None:
    task = REG.get("td3-hopper-v1")
    assert get_kind(task.eval.rollout).null_artifact(task) is None
