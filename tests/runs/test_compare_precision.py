"""``runs compare`` prints numbers at the precision they support (issue 34, item 4).

Two runs that differ in the 6th decimal printed 'Δ +5.298e-06': noise formatted as a
finding. Scores are shown to 3 decimals, other metrics at the precision of their values
and standard error, and a difference below the shown precision reads '0.000 (same)';
``--json`` keeps every digit. Summaries made for the case.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.runs import RunSummary, compare

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
        "status": "scored",
        "primary_metric": "mean_return",
        "agent_cmd": "python agent.py",
    }
    fields.update(kw)
    return RunSummary(**fields)


def test_compare_shows_noise_below_the_shown_precision_as_the_same() -> None:
    """Issue 34: two runs 5.298e-06 apart printed 'Δ +5.298e-06', noise as a finding."""
    from ale_robotics.cli.app import out
    from ale_robotics.cli.runs_tables import print_comparison

    a = _run(1, "t", "a", 1.0183, metrics={"mean_return": 1000.0}, episode_values=[1000.0] * 10)
    b = _run(
        2,
        "t",
        "b",
        1.0183 + 5.298e-06,
        metrics={"mean_return": 1000.0 + 5.2e-06},
        episode_values=[1000.0] * 10,
    )
    worse = _run(3, "t", "c", 1.0183 - 0.0123, metrics={"mean_return": 987.6})
    c = compare([a, b, worse])
    with out.capture() as captured:
        print_comparison(c)
    text = captured.get()
    assert "e-0" not in text and "5.298" not in text
    score = next(r for r in c.rows if r.metric == "score")
    primary = next(r for r in c.rows if r.primary)
    assert (score.decimals, score.same) == (3, [None, True, False])
    assert primary.same == [None, True, False]
    assert "Δ 0.000 (same)" in text  # the score row
    assert "Δ -0.012" in text and "1.018" in text and "1.006" in text
    assert "Δ -12" in text and "Δ -12 [" not in text  # no episodes: no interval
    # --json keeps every digit
    doc = c.model_dump(mode="json")
    assert doc["rows"][0]["diffs"][1] == pytest.approx(5.298e-06, rel=1e-6)


def test_diff_text_rounds_to_the_shown_precision_and_says_when_an_interval_covers_0() -> None:
    from ale_robotics.runs.compare import diff_text, shown_decimals

    assert diff_text(5.298e-06, 3) == "0.000 (same)"
    assert diff_text(-0.0004, 3) == "0.000 (same)"
    assert diff_text(0.0123, 3) == "+0.012"
    assert diff_text(0.2, 1, interval=(-0.1, 0.5)) == "+0.2 [-0.1, +0.5] (interval covers 0)"
    assert diff_text(0.2, 1, interval=(0.1, 0.3)) == "+0.2 [+0.1, +0.3] differs"
    assert diff_text(None, 3) == ""
    # 4 significant digits of the row's largest value, no finer than the standard error
    assert shown_decimals("score", [1000.0]) == 3
    assert shown_decimals("mean_return", [982.02, 21.7]) == 1
    assert shown_decimals("mean_return", [982.02, 21.7], [0.0, 83.0]) == 0
    assert shown_decimals("mean_return", [982.02, 21.7], [0.0, 8.3]) == 1
    assert shown_decimals("success_rate", [0.05, 0.1]) == 4
