"""The leaderboard: the best official run of each agent (label) on each task.

A run ranks only when the evaluator measured, under the task's full protocol, what
the agent gave it (:attr:`~.summary.RunSummary.not_ranked_because` says why not, one
rule for every listing): a smoke run (``--episodes``) evaluated fewer episodes, an
interrupted or failed run has no verdict, a run without a result (nothing submitted,
a rejected or timed-out submission, no eval session opened) had nothing measured,
and a result not read on the harness channel is not the evaluator's official word,
so none of them ranks, however high its number. An unscored run (no paper target
synced) has nothing to rank by. Every other run counts with what it scored, a 0 too
(a failed gate or an unusable measurement is a verdict on what was measured).

Results measured by different engines (a kind that runs in an engine environment of its
own, on one device or another: ``EvalResult.engine``) need not agree to the bit, so each
engine and device is a board of its own within its task (:func:`board`), unless the task
declares them comparable (``eval.engines_comparable``).

Each row carries its best run's model tokens and calls beside its score, as HAL reports
cost beside accuracy: what the score cost, where the run's model gateway counted it
(None where nothing did: a run without a gateway has no known cost, not a zero one).
The ranking is by score alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from ale_robotics.runs.summary import RunSummary

__all__ = ["LeaderRow", "board", "leaderboard"]


class LeaderRow(BaseModel):
    """One (task, label) on the leaderboard: its best run, and how many runs it had."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = Field(description="1 for the best label of its board; no two rows share one.")
    task_id: str
    board: str = Field(
        description="What the row is ranked within: the task, and the engine and device "
        "that measured it when the task's results are not comparable across engines "
        "('td3-inverted-pendulum-warp-v1 on mujoco-warp/cpu')."
    )
    label: str
    score: float = Field(description="The best run's score.")
    run_id: str = Field(description="The best run (the earliest of equal scores).")
    run_dir: Path
    started_at: AwareDatetime = Field(description="When the best run started.")
    runs: int = Field(description="Ranked runs of this label on this task.")
    primary_metric: str | None = None
    primary_value: float | None = Field(
        default=None, description="The best run's measured primary metric."
    )
    model_tokens: int | None = Field(
        default=None,
        description="The best run's model tokens (input + output), its cost beside its "
        "score; None when no model gateway counted them (never 0 for unknown).",
    )
    model_calls: int | None = Field(
        default=None, description="The best run's model calls; None as for model_tokens."
    )


def board(s: RunSummary) -> str:
    """The table ``s`` ranks in: its task, apart per engine and device where the task does
    not declare its engines' results comparable (a task unknown here: per engine too)."""
    if not s.engine:
        return s.task_id
    from ale_robotics.tasks import default_registry

    registry = default_registry()
    if s.task_id in registry and registry.get(s.task_id).eval.engines_comparable:
        return s.task_id
    return f"{s.task_id} on {s.engine}"


def _order(s: RunSummary) -> tuple[str, float, dt.datetime, str]:
    assert s.score is not None
    return (board(s), -s.score, s.started_at, s.run_id)


def leaderboard(runs: Iterable[RunSummary], task_id: str | None = None) -> list[LeaderRow]:
    """The best ranked run per (board, label) of ``runs`` (of ``task_id`` only, when given).

    Ordered by board (the task, or the task on one engine: :func:`board`), then score
    (highest first), then the earlier start, which also picks the best among a label's
    equal scores: who got there first keeps the place. Ranks count from 1 in each board.
    """
    ranked = sorted(
        (s for s in runs if s.ranked and (task_id is None or s.task_id == task_id)), key=_order
    )
    best: dict[tuple[str, str], RunSummary] = {}
    counts: dict[tuple[str, str], int] = {}
    for s in ranked:
        key = (board(s), s.label)
        best.setdefault(key, s)
        counts[key] = counts.get(key, 0) + 1
    rows: list[LeaderRow] = []
    rank: dict[str, int] = {}
    for s in sorted(best.values(), key=_order):
        assert s.score is not None
        where = board(s)
        rank[where] = rank.get(where, 0) + 1
        rows.append(
            LeaderRow(
                rank=rank[where],
                task_id=s.task_id,
                board=where,
                label=s.label,
                score=s.score,
                run_id=s.run_id,
                run_dir=s.run_dir,
                started_at=s.started_at,
                runs=counts[(where, s.label)],
                primary_metric=s.primary_metric,
                primary_value=s.primary_value,
                model_tokens=s.model_tokens,
                model_calls=s.model_calls,
            )
        )
    return rows
