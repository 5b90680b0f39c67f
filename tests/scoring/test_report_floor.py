"""The floor beside the score: (measured - floor) / (target - floor), the score untouched."""

from __future__ import annotations

import math

import pytest

from ale_robotics.scoring import score
from ale_robotics.scoring.report import ScoreReport
from ale_robotics.tasks import default_registry

REG = default_registry()


def _report(task_id: str, measured: dict[str, float]) -> ScoreReport:
    return score(REG.get(task_id), measured, REG.target(task_id))


def test_higher_is_better_floor_normalized_and_said() -> None:
    plain = _report("td3-hopper-v1", {"mean_return": 1000.0})
    target = plain.target_value
    assert target is not None
    floored = plain.with_floor(150.0, "null_action")
    assert floored.floor_normalized == pytest.approx((1000.0 - 150.0) / (target - 150.0))
    # the official score keeps the published formula
    assert (floored.score, floored.status, floored.ratio) == (plain.score, "scored", plain.ratio)
    assert floored.score_line() == (
        f"{plain.score_line()} [floor 150.0, floor-normalized {floored.floor_normalized:.3f}]"
    )
    assert floored.explanation.startswith(plain.explanation)
    assert "Doing nothing (the null action) measures 150.0" in floored.explanation


def test_lower_is_better_uses_the_same_formula() -> None:
    plain = _report("td3-reacher-v1", {"mean_cost": 6.0, "mean_return": -6.0})
    target = plain.target_value
    assert target is not None and target < 11.5
    floored = plain.with_floor(11.5, "null_action")
    expected = (6.0 - 11.5) / (target - 11.5)
    assert floored.floor_normalized == pytest.approx(expected) and 0 < expected < 1
    # at the floor: 0; at the paper's value: 1; worse than the floor: below 0
    assert plain.with_floor(6.0, "null_action").floor_normalized == 0.0
    at_paper = _report("td3-reacher-v1", {"mean_cost": target, "mean_return": -target})
    assert at_paper.with_floor(11.5, "null_action").floor_normalized == pytest.approx(1.0)
    worse = _report("td3-reacher-v1", {"mean_cost": 13.0, "mean_return": -13.0})
    normalized = worse.with_floor(11.5, "null_action").floor_normalized
    assert normalized is not None and normalized < 0


@pytest.mark.parametrize("floor", [3304.75, 5000.0, math.nan])
def test_no_normalized_figure_when_the_paper_does_not_beat_the_floor(floor: float) -> None:
    plain = _report("td3-hopper-v1", {"mean_return": 1000.0})
    floored = plain.with_floor(floor, "null_action")
    assert floored.floor_normalized is None
    assert "floor-normalized" not in floored.score_line()
    assert floored.score == plain.score


def test_no_normalized_figure_for_a_run_that_is_not_scored() -> None:
    failed = score(
        REG.get("td3-hopper-v1"), {}, REG.target("td3-hopper-v1"), no_result="no submission"
    )
    floored = failed.with_floor(150.0, "null_action")
    assert floored.floor == 150.0 and floored.floor_normalized is None
    assert floored.score == 0.0 and floored.status == "no_result"


def test_zero_output_is_named() -> None:
    floored = _report("td3-hopper-v1", {"mean_return": 1000.0}).with_floor(20.0, "zero_output")
    assert floored.floor_policy == "zero_output"
    assert "its policy with every weight zero" in floored.explanation
