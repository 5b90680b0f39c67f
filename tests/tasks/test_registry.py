"""Invariants over every registered task, plus registry and manifest rules."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from ale_robotics.errors import ConfigError, TaskNotFoundError
from ale_robotics.tasks import Registry, TaskMode, default_registry, load_manifest
from ale_robotics.tasks.manifest import ReleaseManifest

REGISTRY = default_registry()
ALL = REGISTRY.ids()


def test_at_least_one_task() -> None:
    assert "td3-inverted-pendulum-v1" in ALL


@pytest.mark.parametrize("task_id", ALL)
def test_config_round_trips_through_json(task_id: str) -> None:
    spec = REGISTRY.get(task_id)
    assert type(spec).model_validate_json(spec.model_dump_json()) == spec


@pytest.mark.parametrize("task_id", ALL)
def test_batch_contract_matches_the_real_env(task_id: str) -> None:
    spec = REGISTRY.get(task_id)
    if spec.mode is not TaskMode.BATCH:
        pytest.skip("not a batch task")
    if spec.eval.rollout == "planner":
        pytest.skip("a planner configuration, no tensors (tests/planning cover its contract)")
    assert spec.contract is not None
    env = gym.make(spec.env.gym_id, **spec.env.kwargs)
    try:
        act_dim = env.action_space.shape[0]
        assert env.spec is not None
        if spec.eval.rollout == "replay":  # trajectories, not weights: actions fit the env
            actions = next(t for t in spec.contract.tensors if t.key == "actions")
            assert actions.shape == [spec.eval.episodes, env.spec.max_episode_steps, act_dim]
            assert [actions.low] * act_dim == env.action_space.low.tolist()
            assert [actions.high] * act_dim == env.action_space.high.tolist()
            return
        obs_dim = env.observation_space.shape[0]
    finally:
        env.close()
    if spec.policy is None:  # the rollout kind's own network (isaaclab: RSL-RL's MLP actor)
        weights = [t for t in spec.contract.tensors if t.key.endswith(".weight")]
        assert weights, f"{task_id}: a policy contract with no layer"
        assert weights[0].shape[-1] == obs_dim and weights[-1].shape[0] == act_dim
        return
    assert spec.contract.tensors == spec.policy.tensor_rules(obs_dim, act_dim)


@pytest.mark.parametrize("task_id", ALL)
def test_manifest_entry_is_for_this_exact_config(task_id: str) -> None:
    entry = REGISTRY.manifest_entry(task_id)
    assert entry is not None, f"{task_id} has no entry in the bundled manifest"
    assert entry.config_sha256 == REGISTRY.entry(task_id).sha256


def test_unknown_task_suggests_close_names() -> None:
    with pytest.raises(TaskNotFoundError, match="did you mean td3-inverted-pendulum-v1"):
        REGISTRY.get("td3-inverted-pendulm-v1")


def _raw() -> bytes:
    return REGISTRY.entry("td3-inverted-pendulum-v1").raw


def test_manifest_with_wrong_hash_is_refused() -> None:
    data = json.loads(load_manifest().model_dump_json())
    data["tasks"]["td3-inverted-pendulum-v1"]["config_sha256"] = "0" * 64
    reg = Registry({"x.json": _raw()}, ReleaseManifest.model_validate(data))
    with pytest.raises(ConfigError, match="was made for config sha256 000000000000"):
        reg.target("td3-inverted-pendulum-v1")


def test_manifest_target_without_source_is_refused() -> None:
    data = json.loads(load_manifest().model_dump_json())
    data["tasks"]["td3-inverted-pendulum-v1"]["target"]["source"]["location"] = " "
    with pytest.raises(ValueError, match="needs a source"):
        ReleaseManifest.model_validate(data)


def test_task_without_manifest_entry_has_no_target() -> None:
    reg = Registry({"x.json": _raw()}, ReleaseManifest(release="empty", tasks={}))
    assert reg.target("td3-inverted-pendulum-v1") is None


def test_duplicate_task_ids_are_refused() -> None:
    with pytest.raises(ConfigError, match="defined twice"):
        Registry({"a.json": _raw(), "b.json": _raw()})


def test_invalid_config_names_task_and_field() -> None:
    data = json.loads(_raw())
    data["eval"]["episodes"] = 3
    reg = Registry({"bad.json": json.dumps(data).encode()})
    with pytest.raises(ConfigError, match=r"(?s)td3-inverted-pendulum-v1.*base_seeds"):
        reg.get("td3-inverted-pendulum-v1")


def test_negative_primary_metric_must_be_a_cost() -> None:
    data = json.loads(_raw())
    data["metrics"][0]["can_be_negative"] = True
    reg = Registry({"bad.json": json.dumps(data).encode()})
    with pytest.raises(ConfigError, match="declare it as a cost"):
        reg.get("td3-inverted-pendulum-v1")


def test_non_positive_paper_value_is_refused() -> None:
    data = json.loads(load_manifest().model_dump_json())
    data["tasks"]["td3-inverted-pendulum-v1"]["target"]["value"] = 0.0
    reg = Registry({"x.json": _raw()}, ReleaseManifest.model_validate(data))
    with pytest.raises(ConfigError, match="td3-inverted-pendulum-v1"):
        reg.target("td3-inverted-pendulum-v1")
