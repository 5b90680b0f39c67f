"""What a job evaluates: the artifact loaded from a snapshot, and the episodes to run.

Shared by the evaluator's runner and by ``ale-robotics audit``, so an audit
re-runs exactly what the evaluator ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy.typing as npt

from ale_robotics.evaluator.replay import load_trajectories, select_subset
from ale_robotics.evaluator.snapshot import SnapshotFile
from ale_robotics.evaluator.validation import load_weights
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["episode_plan", "load_artifact"]


def load_artifact(files: list[SnapshotFile], task: TaskSpec) -> dict[str, npt.NDArray[Any]]:
    """Policy weights, a replay task's trajectory set or a planning task's validated
    configuration (ale_robotics/planning/backend.py); raises SubmissionRejected."""
    assert task.contract is not None
    if task.eval.backend == "replay":
        return dict(load_trajectories(files, task))
    if task.eval.backend in ("planner", "edmp"):
        from ale_robotics.planning.backend import load_planning_artifact

        return dict(load_planning_artifact(files, task))
    return dict(load_weights(files, task.contract))


def episode_plan(task: TaskSpec, seeds: Sequence[HiddenSeed]) -> list[tuple[int, int]]:
    """(index, env seed) per episode: every hidden seed, or for a replay task the public
    instances of the hidden subset (the hidden values only choose which instances run)."""
    if task.eval.backend == "replay":
        return select_subset(task, seeds)
    return [(s.index, s.value) for s in seeds]
