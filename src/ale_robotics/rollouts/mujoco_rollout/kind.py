"""The ``mujoco_rollout`` kind: the contract's MLP, all of a shard's physics stepped natively.

For the env families with a re-implemented vectorized step
(:data:`.families.FAMILIES`: every Gymnasium MuJoCo env the tasks use); the task
sets the threads per shard (``eval.threads``, a setting only this kind reads) so
that a result does not depend on the host (it does not depend on the thread
count either: see :mod:`.vectorized`). The rollout itself is
:func:`.vectorized.rollout_on`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard
from ale_robotics.rollouts.policy import PolicyRolloutKind, policy_for
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.model.episode import EpisodeOutcome

__all__ = ["FAMILY_GYM_IDS", "MujocoRolloutKind"]

FAMILY_GYM_IDS = frozenset(
    {
        "HalfCheetah-v5",
        "Hopper-v5",
        "Walker2d-v5",
        "InvertedPendulum-v5",
        "InvertedDoublePendulum-v5",
        "Reacher-v5",
    }
)
"""The envs :data:`.families.FAMILIES` steps (a test keeps the two equal), named here so
that checking a task config loads neither numpy nor Gymnasium: every process that reads a
task does, the agent's SDK among them."""

_ENV_CACHE: dict[str, tuple[Any, list[Any]]] = {}
"""Unwrapped envs by env section, with the ``MjData`` objects their rollouts reuse; kept
across a worker's shards (building an env compiles the model, an ``MjData`` allocates a
megabytes arena); ``reset(seed=...)`` before every episode makes reuse exact."""


def _env(task: TaskSpec) -> tuple[Any, list[Any]]:
    from ale_robotics.envs.make import make_env

    key = task.env.model_dump_json()
    cached = _ENV_CACHE.get(key)
    if cached is None:
        cached = _ENV_CACHE[key] = (make_env(task.env, time_limit=False).unwrapped, [])
    return cached


class MujocoRolloutKind(PolicyRolloutKind):
    """Native stepping of the families in :data:`.families.FAMILIES`."""

    name = "mujoco_rollout"
    settings = frozenset({"eval.threads"})
    env_ids = FAMILY_GYM_IDS
    step_name = "vectorized step"

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """The shard as one batch; episodes that terminate leave it, the others go on to the
        task's step limit. Outcomes in the order of ``seeds``; ``on_episode`` as each ends."""
        from ale_robotics.rollouts.mujoco_rollout.vectorized import family_of, rollout_on

        family = family_of(task)
        env, datas = _env(task)
        policy = policy_for(task, artifact, env.action_space.high)
        return rollout_on(
            env, family, task, policy, seeds, task.eval.threads, on_episode=on_episode, datas=datas
        )

    def vector_stepper(self, task: TaskSpec, envs: Sequence[Any]) -> Any:
        """The native stepper of an interactive session's envs of ``task``
        (:class:`.stepper.NativeStepper`), or None where it cannot step them; found by
        :func:`ale_robotics.evaluator.sessions.envs.make_stepper`."""
        from ale_robotics.rollouts.mujoco_rollout.stepper import stepper_for

        return stepper_for(task, envs)
