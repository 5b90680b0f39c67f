"""The score report says how many eval episodes the evaluator completed with the null action."""

from __future__ import annotations

import pytest

from ale_robotics.scoring import score
from ale_robotics.scoring.report import ScoreReport
from ale_robotics.tasks import default_registry

TASK = "td3-reacher-v1"


def _report() -> ScoreReport:
    reg = default_registry()
    return score(reg.get(TASK), {"mean_cost": 10.0, "mean_return": -10.0}, reg.target(TASK))


def test_abandoned_episodes_are_in_the_fields_the_explanation_and_the_score_line() -> None:
    plain = _report()
    marked = plain.with_abandoned(3, 10)
    assert (marked.abandoned_episodes, marked.evaluated_episodes) == (3, 10)
    assert marked.score == plain.score and marked.status == plain.status  # measured as played
    line = marked.score_line()
    assert line.startswith(plain.score_line())
    assert line.endswith("[3 of 10 episodes abandoned (completed with the null action)]")
    assert marked.explanation.startswith(plain.explanation)
    assert "3 of 10 episodes abandoned (completed with the null action)" in marked.explanation
    assert "null action" not in plain.score_line() + plain.explanation


def test_none_abandoned_changes_no_text() -> None:
    plain = _report()
    marked = plain.with_abandoned(0, 10)
    assert marked.score_line() == plain.score_line()
    assert marked.explanation == plain.explanation
    assert (marked.abandoned_episodes, marked.evaluated_episodes) == (0, 10)
    assert (
        _report()
        .with_abandoned(1, 1)
        .score_line()
        .endswith("[1 of 1 episode abandoned (completed with the null action)]")
    )


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="impossible"):
        _report().with_abandoned(11, 10)
