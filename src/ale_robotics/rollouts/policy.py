"""What the policy kinds share: the contract's MLP in numpy, and their defaults.

A *policy kind* rolls out the network the task declares (``policy``), built by the
evaluator from the submitted weights; the kinds differ only in how they step the
simulation (``gymnasium``: Gymnasium envs; ``mujoco_rollout``: ``mujoco.rollout``
in C threads; a future MJX kind: on an accelerator). :class:`PolicyRolloutKind`
gives them everything but that: the weights as the artifact, one episode per
hidden seed, the first-N smoke cut and the rollout outcome record. A new policy
kind subclasses it and implements :meth:`~.base.RolloutKind.run_shard` only.

It lives outside the kinds' folders so that the kinds do not import each other
(an import-linter contract keeps them independent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.episode import EpisodeOutcome
from ale_robotics.evaluator.result import BatchOutcomes, RolloutOutcomes
from ale_robotics.evaluator.snapshot import SnapshotFile
from ale_robotics.evaluator.validation import load_weights
from ale_robotics.rollouts.base import Artifact, RolloutKind
from ale_robotics.tasks.spec import PolicyArchitecture, TaskMode, TaskSpec

__all__ = ["MLPPolicy", "PolicyRolloutKind", "policy_for"]


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


class PolicyRolloutKind(RolloutKind):
    """A kind that rolls out the task's ``policy`` with the submitted weights."""

    def check_task(self, task: TaskSpec) -> None:
        if task.mode is TaskMode.BATCH and task.policy is None:
            raise ValueError(
                f"task {task.id}: a batch task of eval.backend {self.name!r} rolls out the "
                "task's 'policy' network, which it does not declare"
            )

    def load_artifact(self, files: list[SnapshotFile], task: TaskSpec) -> Artifact:
        """The policy's weights, checked against the contract's exact tensor rules."""
        assert task.contract is not None
        return dict(load_weights(files, task.contract))

    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        return RolloutOutcomes.from_episodes(self.name, outcomes)
