"""Smoke runs: the task's protocol cut to its first N episodes, and labelled as such.

``ale-robotics run TASK --episodes N`` lets an operator check that an agent
runs end to end without paying for the full evaluation. The embedded evaluator
then serves :func:`smoke_task` instead of the registry's task, so everything
downstream (GetSpec's episode budget, eval sessions, the batch pipeline, seed
commitments) follows it unchanged, and every result it produces carries a
:class:`~ale_robotics.model.result.SmokeRun` that the report repeats. The
episodes are the first N of the official run's (same base seeds, same hidden
seeds), so a smoke run is a prefix of the real thing, never a different sample.
An official run never uses it, and no result of a smoke run is ever ``official``
(GetEvalResult sets only ``read_on_harness_channel`` on it).
"""

from __future__ import annotations

from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.result import SmokeRun
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["smoke_run", "smoke_task"]


def smoke_task(task: TaskSpec, episodes: int) -> TaskSpec:
    """``task`` evaluating only its first ``episodes`` base seeds (all of them if fewer).

    How a task is cut is its rollout kind's
    (:meth:`~ale_robotics.model.rollout_kind.RolloutKind.smoke_task`): replay tasks keep
    every published instance (the submission must cover them all) and replay a
    smaller hidden subset instead.
    """
    if episodes < 1:
        raise ValueError(f"a smoke run needs at least 1 episode, got {episodes}")
    return get_kind(task.eval.rollout).smoke_task(task, episodes)


def smoke_run(task: TaskSpec, episodes: int) -> SmokeRun:
    """What a smoke run of ``episodes`` evaluates of ``task`` (the registry's, full task)."""
    return SmokeRun(
        episodes=smoke_task(task, episodes).eval.evaluated_episodes,
        of=task.eval.evaluated_episodes,
    )
