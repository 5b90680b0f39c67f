"""The batch pipeline's entry point in a worker: one shard of episodes, run by the task's kind.

Which simulation steps a shard (Gymnasium envs, ``mujoco.rollout``, an open-loop
replay, a motion planner...) is the task's rollout kind
(:mod:`ale_robotics.rollouts`, chosen by ``eval.backend``); this module only
looks it up, so the executors (:mod:`.execution`) and ``ale-robotics audit`` run
every kind through the same call.

Reproducibility: episodes are grouped into shards of ``eval.envs_per_shard`` in
index order (:func:`.execution.base.shard_layout`), a layout fixed by the task
config, so a result does not depend on how many worker processes a host has
(batched matmul may round differently for different batch sizes; a fixed layout
keeps every batch the same).

The per-episode outcome and the policy fault are plain data, in
:mod:`ale_robotics.model.episode`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ale_robotics.evaluator.results.metrics import compute as compute_metrics
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["rollout_episodes", "summarize"]


def rollout_episodes(
    task: TaskSpec,
    artifact: Artifact,
    seeds: Shard,
    on_episode: EpisodeCallback | None = None,
) -> list[EpisodeOutcome]:
    """Run one episode per ``(index, seed)`` in this process, the way the task's kind does."""
    return get_kind(task.eval.rollout).run_shard(task, artifact, seeds, on_episode)


def summarize(outcomes: Sequence[EpisodeOutcome], names: Iterable[str] = ()) -> dict[str, float]:
    """The task metrics from per-episode outcomes (see :mod:`.results.metrics`).

    Always mean/std return and mean length; ``success_rate`` and
    ``mean_final_distance`` when every outcome carries them; plus the metrics
    ``names`` (the task's declared ones, e.g. ``mean_cost``), computed by name.
    """
    return compute_metrics(outcomes, names)
