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
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from ale_robotics.runs.summary import RunSummary

__all__ = ["LeaderRow", "leaderboard"]


class LeaderRow(BaseModel):
    """One (task, label) on the leaderboard: its best run, and how many runs it had."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = Field(description="1 for the best label of its task; no two rows share one.")
    task_id: str
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


def _order(s: RunSummary) -> tuple[str, float, dt.datetime, str]:
    assert s.score is not None
    return (s.task_id, -s.score, s.started_at, s.run_id)


def leaderboard(runs: Iterable[RunSummary], task_id: str | None = None) -> list[LeaderRow]:
    """The best ranked run per (task, label) of ``runs`` (of ``task_id`` only, when given).

    Ordered by task, then score (highest first), then the earlier start, which also
    picks the best among a label's equal scores: who got there first keeps the place.
    Ranks count from 1 in each task.
    """
    ranked = sorted(
        (s for s in runs if s.ranked and (task_id is None or s.task_id == task_id)), key=_order
    )
    best: dict[tuple[str, str], RunSummary] = {}
    counts: dict[tuple[str, str], int] = {}
    for s in ranked:
        key = (s.task_id, s.label)
        best.setdefault(key, s)
        counts[key] = counts.get(key, 0) + 1
    rows: list[LeaderRow] = []
    rank: dict[str, int] = {}
    for s in sorted(best.values(), key=_order):
        assert s.score is not None
        rank[s.task_id] = rank.get(s.task_id, 0) + 1
        rows.append(
            LeaderRow(
                rank=rank[s.task_id],
                task_id=s.task_id,
                label=s.label,
                score=s.score,
                run_id=s.run_id,
                run_dir=s.run_dir,
                started_at=s.started_at,
                runs=counts[(s.task_id, s.label)],
                primary_metric=s.primary_metric,
                primary_value=s.primary_value,
            )
        )
    return rows
