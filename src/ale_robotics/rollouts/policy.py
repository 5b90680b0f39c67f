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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ale_robotics.model.rollout_kind import Artifact, RolloutKind, VideoActor
from ale_robotics.tasks.spec import TaskMode, TaskSpec

if TYPE_CHECKING:
    import numpy.typing as npt

    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.model.outcomes import BatchOutcomes
    from ale_robotics.model.snapshot import SnapshotFile
    from ale_robotics.rollouts.mlp import MLPPolicy

__all__ = ["PolicyRolloutKind", "policy_for"]


def policy_for(task: TaskSpec, artifact: Artifact, action_high: npt.ArrayLike) -> MLPPolicy:
    """The task's policy with the submitted weights, scaled to the env's action bound
    (:func:`.mlp.policy_for`; here so that a kind's module needs no numpy to be loaded)."""
    from ale_robotics.rollouts.mlp import policy_for as build

    return build(task, artifact, action_high)


class PolicyRolloutKind(RolloutKind):
    """A kind that rolls out the task's ``policy`` with the submitted weights."""

    env_ids: ClassVar[frozenset[str] | None] = None
    """The Gymnasium env ids this kind can step (its re-implemented families), or None for
    any env; :meth:`check_task` refuses a task of another env."""
    step_name: ClassVar[str] = "step"
    """What the refusal calls the kind's own step ("vectorized step", "JAX step")."""

    def check_task(self, task: TaskSpec) -> None:
        if task.mode is TaskMode.BATCH and task.policy is None:
            raise ValueError(
                f"task {task.id}: a batch task of eval.backend {self.name!r} rolls out the "
                "task's 'policy' network, which it does not declare"
            )
        if self.env_ids is not None and task.env.gym_id not in self.env_ids:
            raise ValueError(
                f"task {task.id}: eval.backend {self.name!r} has no {self.step_name} for "
                f"{task.env.gym_id} (it steps {sorted(self.env_ids)}); use backend 'gymnasium'"
            )

    def load_artifact(self, files: list[SnapshotFile], task: TaskSpec) -> Artifact:
        """The policy's weights, checked against the contract's exact tensor rules."""
        from ale_robotics.rollouts.weights import load_weights

        assert task.contract is not None
        return dict(load_weights(files, task.contract))

    floor_policy = "zero_output"

    def null_artifact(self, task: TaskSpec) -> Artifact | None:
        """The contract's policy with every tensor zero: its output is the output
        activation of 0 (tanh or identity: 0), scaled to the action bounds, so each step
        plays the null action of a task whose bounds hold 0, through the kind's own
        engine. None for a task without a contract (interactive: no policy to roll out)."""
        import numpy as np

        if task.contract is None or not task.contract.tensors:
            return None
        return {t.key: np.zeros(t.shape, dtype=np.dtype(t.dtype)) for t in task.contract.tensors}

    video_source: ClassVar[str | None] = "policy"

    def video_actor(
        self, task: TaskSpec, artifact: Artifact, index: int, action_space: Any
    ) -> VideoActor | None:
        """The submitted policy on one observation at a time, in the env's action dtype (the
        kinds roll out whole shards at once, so a re-rolled episode may differ from the
        official one in the last bits, and chaotic envs may drift; the video says so)."""
        policy = policy_for(task, artifact, action_space.high)
        dtype = action_space.dtype

        def act(obs: Any, step: int) -> Any:
            return policy(obs[None])[0].astype(dtype, copy=False)

        return act

    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        from ale_robotics.model.outcomes import RolloutOutcomes

        return RolloutOutcomes.from_episodes(self.name, outcomes)
