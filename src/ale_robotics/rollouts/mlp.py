"""The contract's MLP in numpy: the network every policy kind rolls out.

Its own module, apart from :mod:`.policy` (the kinds' shared defaults), because it
needs numpy and that module must not: checking a task config (``TaskSpec``
validation asks the task's kind) happens in every process that reads a task, the
agent's SDK reading GetSpec among them, which never runs a policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.tasks.contract import PolicyArchitecture
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["MLPPolicy", "policy_for"]


class MLPPolicy:
    """The contract's MLP in numpy (float32, torch Linear layout: y = x W^T + b).

    Batched over rows: one matmul per layer per step for all envs of a shard,
    instead of one per env.
    """

    def __init__(
        self,
        arch: PolicyArchitecture,
        weights: Mapping[str, npt.NDArray[Any]],
        action_high: npt.NDArray[np.floating],
    ) -> None:
        self._layers = [
            (
                np.ascontiguousarray(weights[f"{n}.weight"].T, dtype=np.float32),
                weights[f"{n}.bias"].astype(np.float32),
            )
            for n in arch.layer_names
        ]
        self._hidden = np.tanh if arch.activation == "tanh" else _relu
        self._out_tanh = arch.output_activation == "tanh"
        self._high = np.asarray(action_high, dtype=np.float32)

    def __call__(self, obs: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        x = np.asarray(obs, dtype=np.float32)
        last = len(self._layers) - 1
        for i, (w, b) in enumerate(self._layers):
            x = x @ w
            x += b
            if i < last:
                x = self._hidden(x)
        # In place: x is this call's own array (the first matmul made it), and a closed
        # loop calls this once per control step, where every allocation shows.
        if self._out_tanh:
            np.tanh(x, out=x)
        x *= self._high
        out: npt.NDArray[np.float32] = x
        return out


def _relu(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.maximum(x, 0.0, out=x)


def policy_for(task: TaskSpec, artifact: Artifact, action_high: npt.ArrayLike) -> MLPPolicy:
    """The task's policy with the submitted weights, scaled to the env's action bound."""
    assert task.policy is not None  # PolicyRolloutKind.check_task refuses a batch task without
    return MLPPolicy(task.policy, artifact, np.asarray(action_high, dtype=np.float32))
