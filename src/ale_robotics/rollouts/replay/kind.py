"""The ``replay`` kind: no policy; a hidden subset of the published instances replayed open-loop.

The task publishes N instances (``eval.base_seeds``) and replays
``eval.replay_subset`` of them, chosen by the run's hidden seeds
(:func:`.trajectories.select_subset`); the submission is one npz of one action
sequence per instance (:func:`.trajectories.load_trajectories`). This kind owns
the task-config rules that make that sound (:meth:`ReplayKind.check_task`): the
contract is exactly the arrays the loader reads, so that a config that parses
is one whose submissions can be checked completely.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import BatchOutcomes, ReplayOutcomes
from ale_robotics.model.rollout_kind import (
    Artifact,
    EpisodeCallback,
    RolloutKind,
    Shard,
    VideoActor,
)
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.rollouts.replay.trajectories import (
    ACTIONS_KEY,
    SEEDS_KEY,
    TRAJECTORIES_ROLE,
    load_trajectories,
    replay_episodes,
    select_subset,
)
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.contract import FileFormat
from ale_robotics.tasks.spec import EvalProtocol, TaskMode, TaskSpec

__all__ = ["ReplayKind"]


class ReplayKind(RolloutKind):
    """Open-loop replay of submitted action sequences (the HER Fetch protocol)."""

    name = "replay"
    settings = frozenset({"eval.replay_subset", "contract.tensors.bounds"})

    def check_task(self, task: TaskSpec) -> None:
        """A replay task's contract must be exactly what :mod:`.trajectories` reads.

        ``seeds`` int64 (N,) and ``actions`` float32 (N, T, A) with N the number of
        published instances and T the episode length, as one npz file of role
        ``trajectories``; no policy network; ``1 <= eval.replay_subset <= N``.
        """
        ev = task.eval
        if ev.replay_subset is None or ev.replay_subset > ev.episodes:
            raise ValueError(
                f"task {task.id}: eval.replay_subset is {ev.replay_subset}; a replay task needs "
                f"1 <= replay_subset <= eval.episodes ({ev.episodes})"
            )
        n, steps = ev.episodes, task.env.max_episode_steps
        if task.mode is not TaskMode.BATCH or task.contract is None or task.policy is not None:
            raise ValueError(f"task {task.id}: a replay task is a batch task with no 'policy'")
        try:
            f = task.contract.file_for_role(TRAJECTORIES_ROLE)
        except KeyError:
            raise ValueError(f"task {task.id}: a replay task needs a 'trajectories' file") from None
        if len(f.names) != 1 or set(f.names.values()) != {FileFormat.NPZ}:
            raise ValueError(f"task {task.id}: the trajectories file must be one npz file")
        rules = {t.key: t for t in task.contract.tensors}
        seeds, actions = rules.get(SEEDS_KEY), rules.get(ACTIONS_KEY)
        if (
            set(rules) != {SEEDS_KEY, ACTIONS_KEY}
            or seeds is None
            or actions is None
            or (seeds.dtype, seeds.shape) != ("int64", [n])
            or actions.dtype != "float32"
            or len(actions.shape) != 3
            or actions.shape[:2] != [n, steps]
        ):
            raise ValueError(
                f"task {task.id}: a replay contract holds exactly 'seeds' int64 [{n}] and "
                f"'actions' float32 [{n}, {steps}, action_dim] (eval.episodes, "
                "env.max_episode_steps)"
            )

    def evaluated_episodes(self, protocol: EvalProtocol) -> int:
        """The hidden subset: the submission covers all published instances, k run."""
        if protocol.replay_subset is not None:
            return protocol.replay_subset
        return protocol.episodes

    def smoke_task(self, task: TaskSpec, episodes: int) -> TaskSpec:
        """Every published instance kept (the submission must cover them all), a smaller
        hidden subset replayed."""
        ev = task.eval
        if ev.replay_subset is None:
            return super().smoke_task(task, episodes)
        limited = ev.model_copy(update={"replay_subset": min(episodes, ev.replay_subset)})
        return task.model_copy(update={"eval": limited})

    def load_artifact(self, files: list[SnapshotFile], task: TaskSpec) -> Artifact:
        return dict(load_trajectories(files, task))

    def null_artifact(self, task: TaskSpec) -> Artifact | None:
        """Every instance's action sequence all zeros (the contract's shape): the null action
        of the task's bounds, which hold 0 (a replay contract's actions are float32 in
        [low, high] per contract.tensors.bounds)."""
        import numpy as np

        assert task.contract is not None
        rule = next(t for t in task.contract.tensors if t.key == ACTIONS_KEY)
        return {ACTIONS_KEY: np.zeros(rule.shape, dtype=np.float32)}

    video_source = "replay"

    def video_actor(
        self, task: TaskSpec, artifact: Artifact, index: int, action_space: Any
    ) -> VideoActor | None:
        """Instance ``index``'s submitted actions, open-loop as the official replay plays them."""
        actions = artifact[ACTIONS_KEY][index]

        def act(obs: Any, step: int) -> Any:
            return actions[step] if step < len(actions) else None

        return act

    def episode_plan(self, task: TaskSpec, seeds: Sequence[HiddenSeed]) -> list[tuple[int, int]]:
        """The public instances of the hidden subset (the hidden values only choose which)."""
        return select_subset(task, seeds)

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        return replay_episodes(task, artifact[ACTIONS_KEY], seeds, on_episode)

    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        return ReplayOutcomes.from_episodes(self.name, base_seeds, outcomes)
