"""The ``mujoco_rollout`` kind: the contract's MLP, all of a shard's physics in C threads.

For the env families with a re-implemented vectorized step
(:data:`.vectorized.FAMILIES`); the task sets the threads per shard
(``eval.threads``, a setting only this kind reads) so that a result does not
depend on the host. The rollout itself is :func:`.vectorized.rollout_on`.
"""

from __future__ import annotations

from typing import Any

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.episode import EpisodeOutcome
from ale_robotics.rollouts.base import Artifact, EpisodeCallback, Shard
from ale_robotics.rollouts.mujoco_rollout.vectorized import FAMILIES, family_of, rollout_on
from ale_robotics.rollouts.policy import PolicyRolloutKind, policy_for
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["MujocoRolloutKind"]


class MujocoRolloutKind(PolicyRolloutKind):
    """Native stepping of the families in :data:`.vectorized.FAMILIES`."""

    name = "mujoco_rollout"
    settings = frozenset({"eval.threads"})

    def check_task(self, task: TaskSpec) -> None:
        super().check_task(task)
        if task.env.gym_id not in FAMILIES:
            raise ValueError(
                f"task {task.id}: eval.backend 'mujoco_rollout' has no vectorized step for "
                f"{task.env.gym_id} (it steps {sorted(FAMILIES)}); use backend 'gymnasium'"
            )

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """The shard as one batch; its episodes never terminate early (truncated at the
        task's step limit), and all finish together."""
        family = family_of(task)
        env: Any = make_env(task.env, time_limit=False).unwrapped
        try:
            policy = policy_for(task, artifact, env.action_space.high)
            runs = rollout_on(env, family, task, policy, seeds, task.eval.threads)
        finally:
            env.close()
        out = [EpisodeOutcome(index, ret, length, False) for index, ret, length in runs]
        if on_episode is not None:
            for o in out:
                on_episode(o)
        return out
