"""The ``isaaclab`` kind: RSL-RL's actor scored in Isaac Lab's own env on hidden seeds.

The artifact is the checkpoint an Isaac Lab user's RSL-RL training writes
(:mod:`.checkpoint`), checked in the evaluator against the task's contract (the actor's
exact keys, shapes, dtypes, finite values). The episodes run in Isaac Lab 3 itself, kit-less
(Newton + MuJoCo Warp, no Isaac Sim), in the ``isaaclab`` engine (:mod:`.engine`), seeded
through Isaac Lab's own seeding one episode at a time (:mod:`.rollout`), offline with the
assets shipped here (:mod:`.offline`). The outcome record is the policy kinds' (returns,
lengths, terminations); the hidden seeds' commitments are in the signed events, and
``audit`` re-derives them and re-runs the episodes.

One worker per host (:attr:`IsaacLabKind.worker_needs`): Isaac Lab holds one simulation per
process and batches a shard's episodes in it; CUDA's torch reserves address space, so no
``RLIMIT_AS``. No videos: the evaluator's own process has no Isaac Lab to film with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ale_robotics.model.rollout_kind import (
    Artifact,
    EpisodeCallback,
    RolloutKind,
    Shard,
    WorkerNeeds,
)
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.model.outcomes import BatchOutcomes
    from ale_robotics.model.snapshot import SnapshotFile

__all__ = ["ENGINE", "SPACES_ENV", "TEMPLATE_TASK", "IsaacLabKind"]

ENGINE = "isaaclab"
"""The engine environment this kind runs in (:class:`.engine.IsaacLabEngine`)."""

TEMPLATE_TASK = "isaaclab-cartpole-direct-v1"
"""A bundled task of this kind: the engine's warm-up builds and steps its env."""

SPACES_ENV = "ale_robotics.rollouts.isaaclab.spaces:IsaacLab-v0"
"""The ``env.gym_id`` of every task of this kind (:mod:`.spaces`)."""

ISAAC_TASKS = frozenset({"Isaac-Cartpole-Direct"})
"""Isaac Lab tasks this kind runs (their assets ship with it: :mod:`.offline`); named here
so that checking a task config imports nothing of the spaces env."""


class IsaacLabKind(RolloutKind):
    """RSL-RL's actor in Isaac Lab's env (see the module docstring)."""

    name = "isaaclab"
    engine = ENGINE
    worker_needs: ClassVar[WorkerNeeds] = WorkerNeeds(unlimited_address_space=True, max_workers=1)

    def check_task(self, task: TaskSpec) -> None:
        where = f"task {task.id}: eval.backend {self.name!r}"
        if task.env.gym_id != SPACES_ENV:
            raise ValueError(f"{where} needs env.gym_id {SPACES_ENV!r} (the task's spaces)")
        isaac_task = task.env.kwargs.get("task")
        if isaac_task not in ISAAC_TASKS:
            raise ValueError(
                f"{where} runs the Isaac Lab tasks {sorted(ISAAC_TASKS)} (env.kwargs.task), "
                f"not {isaac_task!r}"
            )
        if task.policy is not None:
            raise ValueError(
                f"{where} builds RSL-RL's actor from the contract's keys; leave 'policy' out"
            )
        if task.contract is None or not task.contract.tensors:
            raise ValueError(f"{where} needs the actor's tensors in its contract")
        if task.training is not None and (
            task.training.simulator != "agent" or task.training.checkpoints is not None
        ):
            raise ValueError(
                f"{where} trains in the agent's sandbox (with the engine shown to it): "
                "leave training out"
            )

    def load_artifact(self, files: list[SnapshotFile], task: TaskSpec) -> Artifact:
        """The actor's weights from the RSL-RL checkpoint (:func:`.checkpoint.load_actor`)."""
        from ale_robotics.rollouts.isaaclab.checkpoint import load_actor

        assert task.contract is not None
        return dict(load_actor(files, task.contract))

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """The shard's episodes in Isaac Lab (:func:`.rollout.run_shard`), in the engine."""
        from ale_robotics.rollouts.isaaclab.rollout import run_shard

        return run_shard(task, artifact, seeds, on_episode)

    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        from ale_robotics.model.outcomes import RolloutOutcomes

        return RolloutOutcomes.from_episodes(self.name, outcomes)

    floor_policy = "zero_output"

    def null_artifact(self, task: TaskSpec) -> Artifact | None:
        """The actor with every tensor zero: it pushes the cart with force 0 each step."""
        import numpy as np

        assert task.contract is not None
        return {t.key: np.zeros(t.shape, dtype=np.dtype(t.dtype)) for t in task.contract.tensors}
