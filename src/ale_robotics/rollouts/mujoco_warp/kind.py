"""The ``mujoco_warp`` kind: the contract's MLP, a shard's physics stepped by MuJoCo Warp.

Same contract, hidden seeds, reset noise and Gymnasium step semantics as ``mujoco_rollout``
(the families of :mod:`ale_robotics.rollouts.mujoco_rollout.families`, which both kinds
share); only the physics differs: MuJoCo Warp (float32, its own solver) of the engine's
MuJoCo, on Warp's CUDA device where there is one, else on its CPU device. A task of this
kind is therefore a task of its own, with results that agree with the C kind's within the
tolerance its tests state, not to the bit, and that name the engine and the device they
were measured on (``EvalResult.engine``).

Runs in the engine environment ``mujoco-warp`` (:mod:`.engine`). One worker per host
(:attr:`MujocoWarpKind.worker_needs`): a GPU is driven by one process, and on a CPU Warp's
kernels are launched one world at a time anyway. Warp reserves address space as CUDA does,
so no ``RLIMIT_AS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard, WorkerNeeds
from ale_robotics.rollouts.policy import PolicyRolloutKind
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.model.episode import EpisodeOutcome

__all__ = ["ENGINE", "FAMILY_GYM_IDS", "TEMPLATE_TASK", "MujocoWarpKind"]

ENGINE = "mujoco-warp"
"""The engine environment this kind runs in (:class:`.engine.MujocoWarpEngine`)."""

TEMPLATE_TASK = "td3-inverted-pendulum-warp-v1"
"""A bundled task of this kind: the engine's warm-up steps each family with its settings."""

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
"""The envs with a family (a test keeps this equal to the families' keys), named here so
that checking a task config imports no numpy."""


class MujocoWarpKind(PolicyRolloutKind):
    """The families of :data:`FAMILY_GYM_IDS`, their physics on MuJoCo Warp."""

    name = "mujoco_warp"
    engine = ENGINE
    worker_needs: ClassVar[WorkerNeeds] = WorkerNeeds(unlimited_address_space=True, max_workers=1)
    env_ids = FAMILY_GYM_IDS
    step_name = "Warp step"
    video_source: ClassVar[str | None] = None
    """No videos: they are episodes played again one env at a time by the evaluator's own
    Gymnasium env, which here is another simulator (C MuJoCo 3.3) than the one scored."""

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """The shard's episodes as one batch of Warp worlds (:func:`.rollout.run_shard`)."""
        from ale_robotics.rollouts.mujoco_warp.rollout import run_shard

        return run_shard(task, artifact, seeds, on_episode)
