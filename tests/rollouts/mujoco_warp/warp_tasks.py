"""Tasks of the ``mujoco_warp`` kind for every family, and their C twins (``mujoco_rollout``).

Importable as ``warp_tasks`` (tests/rollouts/mujoco_warp/conftest.py puts this directory on
``sys.path``). A family's task is the bundled ``td3-inverted-pendulum-warp-v1`` with the
family's env, a small MLP whose contract fits the env's observation and action sizes, and
a horizon of the test's choosing; its twin differs only in ``eval.backend``, so the two
kinds get the same contract, weights, hidden seeds and shard layout.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import gymnasium as gym
import numpy as np

from ale_robotics.tasks import TaskSpec, default_registry

WARP_TASK = "td3-inverted-pendulum-warp-v1"
HIDDEN = 32


@functools.cache
def _sizes(gym_id: str) -> tuple[int, int]:
    env = gym.make(gym_id)
    try:
        return int(env.observation_space.shape[0]), int(env.action_space.shape[0])
    finally:
        env.close()


def family_task(
    gym_id: str, steps: int, backend: str = "mujoco_warp", envs_per_shard: int = 64
) -> TaskSpec:
    """The family's task of ``backend`` with ``steps``-step episodes (see the docstring)."""
    doc: dict[str, Any] = json.loads(default_registry().entry(WARP_TASK).raw)
    obs, act = _sizes(gym_id)
    doc["id"] = f"warp-{gym_id.lower().replace('-', '')}-{backend.replace('_', '')}-v1"
    doc["env"] = {"gym_id": gym_id, "kwargs": {}, "max_episode_steps": steps}
    doc["policy"]["hidden_sizes"] = [HIDDEN, HIDDEN]
    doc["contract"]["tensors"] = [
        {"key": "l1.weight", "shape": [HIDDEN, obs], "dtype": "float32"},
        {"key": "l1.bias", "shape": [HIDDEN], "dtype": "float32"},
        {"key": "l2.weight", "shape": [HIDDEN, HIDDEN], "dtype": "float32"},
        {"key": "l2.bias", "shape": [HIDDEN], "dtype": "float32"},
        {"key": "l3.weight", "shape": [act, HIDDEN], "dtype": "float32"},
        {"key": "l3.bias", "shape": [act], "dtype": "float32"},
    ]
    doc["eval"]["backend"] = backend
    doc["eval"]["envs_per_shard"] = envs_per_shard
    if backend == "mujoco_rollout":
        doc["eval"]["threads"] = 1
    return TaskSpec.model_validate(doc)


def weights(task: TaskSpec, seed: int = 0, scale: float = 0.3) -> dict[str, np.ndarray]:
    """A random MLP of the task's contract (seeded): actions that move every joint."""
    rng = np.random.default_rng(seed)
    assert task.contract is not None
    return {
        t.key: (rng.standard_normal(t.shape) * scale).astype(np.float32)
        for t in task.contract.tensors
    }
