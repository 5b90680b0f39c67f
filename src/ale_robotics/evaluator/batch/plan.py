"""What a job evaluates: the artifact loaded from a snapshot, and the episodes to run.

Shared by the evaluator's runner and by ``ale-robotics audit``, so an audit
re-runs exactly what the evaluator ran. Both answers are the task's rollout
kind's (:mod:`ale_robotics.rollouts`): policy weights, a replay task's
trajectory set or a planning task's validated configuration; one episode per
hidden seed, or a replay task's hidden subset of its public instances.
"""

from __future__ import annotations

from collections.abc import Sequence

from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["episode_plan", "load_artifact"]


def load_artifact(files: list[SnapshotFile], task: TaskSpec) -> Artifact:
    """The submission's artifact as the task's kind reads it; raises SubmissionRejected."""
    assert task.contract is not None
    return get_kind(task.eval.rollout).load_artifact(files, task)


def episode_plan(task: TaskSpec, seeds: Sequence[HiddenSeed]) -> list[tuple[int, int]]:
    """(index, env seed) per episode, as the task's kind plans them from the hidden seeds:
    every hidden seed, or for a replay task the public instances of the hidden subset
    (the hidden values only choose which instances run)."""
    return get_kind(task.eval.rollout).episode_plan(task, seeds)
