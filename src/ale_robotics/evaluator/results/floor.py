"""The floor of a result: the same measurement of a submission that does nothing.

A score says how close a measurement came to the paper's; it does not say how much of
it was free. A Reacher that never moves already has a small cost (0.369 of the paper's
score), a Hopper that stands still collects its alive bonus (0.302): a reader who sees
0.4 cannot tell a policy that learned a little from one that learned nothing. So every
measured result of a task with a null submission also carries its *floor*
(:class:`~ale_robotics.model.result.Floor`): the evaluator's own measurement, on the
run's own hidden seeds, through the same engine, of

* batch tasks: the kind's null artifact (:meth:`~ale_robotics.model.rollout_kind.
  RolloutKind.null_artifact`: the contract's policy with zero weights; a replay task's
  all-zero action sequences), run on the job's executor (:mod:`..batch.floor`);
* interactive tasks: an eval session the agent abandoned before its first step
  (:mod:`..sessions.floor`), which the evaluator completes with the null action exactly
  as it completes a real one, so the floor is what an agent scores by doing nothing.

The official score keeps the published formula; the floor is only read beside it
(``ScoreReport.floor``, ``floor_normalized``). This module turns the floor's episodes
into the :class:`Floor` record, the same way the official metrics are computed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ale_robotics.evaluator.results.metrics import compute
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.result import Floor
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["floor_of"]


def floor_of(task: TaskSpec, outcomes: Sequence[EpisodeOutcome], policy: str) -> Floor:
    """The floor record of ``outcomes`` (episodes of a null submission of ``task``).

    Raises :class:`~.metrics.NonFiniteMetric` like the official metrics would: a null
    submission whose episodes give a non-finite metric has no floor.
    """
    ordered = sorted(outcomes, key=lambda o: o.index)
    metrics = compute(ordered, (m.name for m in task.metrics))
    return Floor.model_validate(
        {
            "policy": policy,
            "metrics": metrics,
            "episode_returns": [float(o.ret) for o in ordered],
        }
    )
