"""The leaderboard's rules on summaries made for the case: what ranks, in which order."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np

from ale_robotics.runs import RunSummary, compare, leaderboard
from ale_robotics.runs.verify import Verification

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _run(n: int, task: str, label: str, score: float | None, **kw: Any) -> RunSummary:
    fields: dict[str, Any] = {
        "run_id": f"run-{n}",
        "run_dir": Path(f"/runs/run-{n}"),
        "task_id": task,
        "label": label,
        "state": "completed",
        "started_at": T0 + dt.timedelta(minutes=n),
        "ended_at": T0 + dt.timedelta(minutes=n, seconds=30),
        "wall_s": 30.0,
        "official": True,
        "score": score,
        "status": "scored" if score is not None else "unscored",
        "primary_metric": "mean_return",
        "agent_cmd": "python agent.py",
        "verification": Verification(verified=True, checks=["score"], evaluator_key="0" * 64),
    }
    fields.update(kw)
    return RunSummary(**fields)


def test_ordered_by_task_then_score_then_the_earlier_start() -> None:
    runs = [
        _run(1, "task-b", "x", 0.5),
        _run(2, "task-a", "late-tie", 0.9),
        _run(3, "task-a", "low", 0.1),
        _run(0, "task-a", "early-tie", 0.9),
        _run(4, "task-a", "best", 1.2),
        _run(5, "task-b", "y", 0.7),
    ]
    rows = leaderboard(runs)
    assert [(r.task_id, r.rank, r.label) for r in rows] == [
        ("task-a", 1, "best"),
        ("task-a", 2, "early-tie"),
        ("task-a", 3, "late-tie"),
        ("task-a", 4, "low"),
        ("task-b", 1, "y"),
        ("task-b", 2, "x"),
    ]
    assert [r.label for r in leaderboard(runs, task_id="task-b")] == ["y", "x"]


def test_the_best_run_of_a_label_stands_for_it_and_its_runs_are_counted() -> None:
    runs = [
        _run(1, "t", "a", 0.4),
        _run(2, "t", "a", 0.8),
        _run(3, "t", "a", 0.8),  # equal to the best, later: not the one shown
        _run(4, "t", "a", 0.0),  # a zero is a verdict: it counts
    ]
    (row,) = leaderboard(runs)
    assert (row.run_id, row.score, row.runs) == ("run-2", 0.8, 4)


def test_smoke_stopped_unofficial_and_unscored_runs_never_rank() -> None:
    runs = [
        _run(1, "t", "ok", 0.2),
        _run(2, "t", "smoke", 1.5, official=False, smoke_episodes=2, smoke_of=10),
        _run(3, "t", "stopped", None, state="interrupted", status=None),
        _run(4, "t", "failed", None, state="failed", status=None),
        _run(5, "t", "unofficial", 1.4, official=False),
        _run(6, "t", "unscored", None),
        _run(7, "t", "ok", 1.3, official=False, smoke_episodes=1, smoke_of=10),
    ]
    rows = leaderboard(runs)
    assert [(r.label, r.runs, r.score) for r in rows] == [("ok", 1, 0.2)]
    reasons = {s.label: s.not_ranked_because for s in runs[:6] if not s.ranked}
    assert reasons == {
        "smoke": "smoke run (2 of 10 episodes)",
        "stopped": "interrupted: no verdict",
        "failed": "failed: no verdict",
        "unofficial": "not an official result",
        "unscored": "unscored (no paper target synced)",
    }


def test_compare_leaves_runs_of_another_task_uncompared() -> None:
    a = _run(1, "t", "a", 1.0, metrics={"mean_return": 900.0}, episode_values=[800.0, 1000.0])
    b = _run(2, "t", "b", 0.9, metrics={"mean_return": 950.0}, episode_values=[940.0, 960.0])
    other = _run(3, "u", "c", 0.5, metrics={"mean_return": 10.0}, episode_values=[10.0])
    c = compare([a, b, other])
    primary = next(r for r in c.rows if r.metric == "mean_return")
    assert primary.diffs == [None, 50.0, None]
    # two episodes each, spreads 100 and 10: the interval of a difference of 50 covers 0
    assert c.spreads[:2] == [100.0, 10.0]
    assert primary.differs == [None, False, None] and primary.paired == [None, False, None]
    low, high = primary.intervals[1]  # type: ignore[misc]
    assert low < 0 < 50 < high
    assert any("of task u" in note for note in c.notes)
    score = c.rows[0]
    assert score.metric == "score" and score.intervals == [None, None, None]


def test_runs_that_played_the_same_seeds_are_compared_episode_by_episode() -> None:
    """Ten episodes with a large spread, the second run 0.5 better on every one: paired by
    episode (same seed commitments) the difference differs from 0; the same values on
    other seeds are not told apart from the noise."""
    rng = np.random.default_rng(1)
    a_values = [float(v) for v in rng.normal(0.0, 1.0, 10)]
    b_values = [v + 0.5 + float(e) for v, e in zip(a_values, rng.normal(0, 0.1, 10), strict=True)]
    seeds = [f"{i:064x}" for i in range(10)]
    other = [f"{i + 100:064x}" for i in range(10)]
    metrics_a = {"mean_return": float(np.mean(a_values))}
    metrics_b = {"mean_return": float(np.mean(b_values))}
    a = _run(1, "t", "a", 0.1, metrics=metrics_a, episode_values=a_values, episode_seeds=seeds)
    same = _run(2, "t", "b", 0.2, metrics=metrics_b, episode_values=b_values, episode_seeds=seeds)
    elsewhere = _run(
        3, "t", "c", 0.2, metrics=metrics_b, episode_values=b_values, episode_seeds=other
    )
    row = next(r for r in compare([a, same, elsewhere]).rows if r.primary)
    assert row.paired == [None, True, False]
    assert row.differs == [None, True, False]
    assert 0 < row.intervals[1][0] < 0.5 < row.intervals[1][1] < 1  # type: ignore[index]
    # seeded: the same runs give the same intervals
    assert next(r for r in compare([a, same, elsewhere]).rows if r.primary) == row


def test_a_summary_reads_back_from_its_own_json() -> None:
    s = _run(1, "t", "a", 0.5, smoke_episodes=2, smoke_of=10, official=False)
    doc = s.model_dump(mode="json")
    assert doc["ranked"] is False and doc["not_ranked_because"].startswith("smoke run")
    assert RunSummary.model_validate(doc) == s
    assert RunSummary.model_validate_json(s.model_dump_json()) == s
