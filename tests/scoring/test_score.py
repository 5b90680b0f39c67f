"""score(): the ratio rules, penalties, conditions, the gate, the report and its score line."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest
from gate_helpers import FORGED_EVALUATOR
from hypothesis import given, settings
from hypothesis import strategies as st

from ale_robotics.scoring import UNSCORED_PHRASE, GateEvidence, ScoreReport, penalty_factor, score
from ale_robotics.tasks import Direction, PaperTarget, TaskSpec
from ale_robotics.tasks.scoring_config import SafetyPenalty

MakeTarget = Callable[..., PaperTarget]
Evidence = Callable[..., GateEvidence]

GOOD_COST = {"final_distance": 0.2, "collision_rate": 0.0, "success_rate": 0.9}

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)
anything = st.floats(allow_nan=True, allow_infinity=True) | st.just(math.nan)
paper_values = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False)
caps = st.floats(min_value=0.1, max_value=10.0)


def _cost_target(make_target: MakeTarget, value: float = 0.1) -> PaperTarget:
    return make_target(value, Direction.LOWER_IS_BETTER, "final_distance")


def _with_scoring(task: TaskSpec, **changes: object) -> TaskSpec:
    return task.model_copy(update={"scoring": task.scoring.model_copy(update=changes)})


# -- the ratio ------------------------------------------------------------------------------------


def test_higher_is_better_example(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(td3, {"mean_return": 950.0, "std_return": 12.0}, make_target(1000.0))
    assert report.status == "scored"
    assert report.ratio == pytest.approx(0.95)
    assert report.base_score == pytest.approx(0.95)
    assert report.score == pytest.approx(0.95)
    assert report.measured == {"mean_return": 950.0, "std_return": 12.0}
    assert report.score_line() == "score: 0.950 (mean_return 950.0 / paper 1000.0)"
    assert report.explanation == (
        "Measured mean_return 950.0 vs paper 1000.0 (final performance, evaluation at the step "
        "budget; Doe et al. 2020, Table 2): "
        "ratio 0.950 (measured/paper), within cap 1.5. No safety penalties. Score 0.950."
    )


def test_bundled_target_source_is_reported(td3: TaskSpec, td3_target: PaperTarget) -> None:
    report = score(td3, {"mean_return": 1000.0}, td3_target)
    assert report.score == pytest.approx(1000.0 / 982.02)
    assert report.target_source == td3_target.source
    assert report.target_value == 982.02
    assert report.target_confidence == "approximate"
    assert report.direction is Direction.HIGHER_IS_BETTER
    assert "learning_curves/InvertedPendulum" in report.explanation
    assert "final performance, mean of the last 10 evaluations" in report.explanation


def test_above_paper_is_clamped_to_cap(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(td3, {"mean_return": 2000.0}, make_target(1000.0))
    assert report.ratio == pytest.approx(2.0)
    assert report.score == 1.5
    assert report.score_line() == "score: 1.500 (mean_return 2000.0 / paper 1000.0, capped at 1.5)"
    assert "ratio 2.000 (measured/paper), clamped to cap 1.5." in report.explanation


def test_task_cap_is_used(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(_with_scoring(td3, cap=1.0), {"mean_return": 1200.0}, make_target(1000.0))
    assert (report.cap, report.score) == (1.0, 1.0)


def test_zero_measured_scores_zero(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(td3, {"mean_return": 0.0}, make_target(1000.0))
    assert (report.status, report.score) == ("scored", 0.0)


@pytest.mark.parametrize(
    ("measured", "expected"),
    [(0.05, 1.5), (0.1, 1.0), (0.2, 0.5), (0.4, 0.25), (0.0, 1.5)],
)
def test_lower_is_better(
    cost_task: TaskSpec, make_target: MakeTarget, measured: float, expected: float
) -> None:
    values = {**GOOD_COST, "final_distance": measured}
    report = score(cost_task, values, _cost_target(make_target))
    assert report.status == "scored"
    assert report.score == pytest.approx(expected)
    assert report.direction is Direction.LOWER_IS_BETTER


def test_lower_is_better_line_and_explanation(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    report = score(cost_task, GOOD_COST, _cost_target(make_target))
    assert report.score_line() == "score: 0.500 (paper 0.1 / final_distance 0.2, lower is better)"
    assert "lower is better: ratio 0.500 (paper/measured), within cap 1.5." in report.explanation


def test_lower_is_better_floors_measured_at_eps(
    cost_task: TaskSpec, make_target: MakeTarget
) -> None:
    task = _with_scoring(cost_task, eps=0.01, cap=1e9)
    report = score(task, {**GOOD_COST, "final_distance": 0.0}, _cost_target(make_target))
    assert report.ratio == pytest.approx(10.0)
    assert report.score == pytest.approx(10.0)


# -- unscored ------------------------------------------------------------------------------------


def test_unscored_without_target(td3: TaskSpec) -> None:
    report = score(td3, {"mean_return": 950.0}, None)
    assert report.status == "unscored"
    assert report.score is None
    assert report.ratio is None and report.base_score is None and report.target_value is None
    assert UNSCORED_PHRASE == "unscored: target not synced"
    assert "unscored: target not synced" in report.explanation
    assert report.score_line() == "score: unscored: target not synced (mean_return 950.0)"


@pytest.mark.parametrize("measured", [{}, {"mean_return": math.nan}])
def test_unscored_never_invents_a_value(td3: TaskSpec, measured: dict[str, float]) -> None:
    report = score(td3, measured, None)
    assert report.score is None
    assert report.status == "unscored"
    assert report.score_line().startswith("score: unscored: target not synced (mean_return ")


# -- unusable measurements ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.nan, "mean_return is nan"),
        (math.inf, "mean_return is inf"),
        (-math.inf, "mean_return is -inf"),
        ("950", "mean_return is nan"),
        (None, "mean_return is nan"),
        (True, "mean_return is nan"),
        ([950.0], "mean_return is nan"),
    ],
)
def test_unusable_primary_scores_zero(
    td3: TaskSpec, make_target: MakeTarget, value: object, problem: str
) -> None:
    report = score(td3, {"mean_return": value}, make_target(1000.0))  # type: ignore[dict-item]
    assert report.status == "invalid_measurement"
    assert report.score == 0.0
    assert report.ratio is None
    assert report.problems == [problem]
    assert report.score_line() == f"score: 0.000 (invalid measurement: {problem})"


def test_negative_higher_is_better_measurement_clamps_to_zero(
    td3: TaskSpec, make_target: MakeTarget
) -> None:
    report = score(td3, {"mean_return": -3.0}, make_target(1000.0))
    assert report.status == "scored"
    assert report.score == 0.0
    assert report.ratio == pytest.approx(-0.003)
    assert "clamped to 0" in report.explanation


def test_missing_primary_scores_zero(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(td3, {"std_return": 1.0}, make_target(1000.0))
    assert (report.status, report.score) == ("invalid_measurement", 0.0)
    assert report.primary_measured is None
    assert report.score_line() == "score: 0.000 (invalid measurement: mean_return was not measured)"
    assert "Measured mean_return missing" in report.explanation


def test_negative_cost_does_not_earn_the_cap(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    report = score(cost_task, {**GOOD_COST, "final_distance": -0.5}, _cost_target(make_target))
    assert (report.status, report.score) == ("invalid_measurement", 0.0)


def test_integer_measurements_are_accepted(td3: TaskSpec, make_target: MakeTarget) -> None:
    assert score(td3, {"mean_return": 500}, make_target(1000.0)).score == pytest.approx(0.5)


def test_unused_metrics_may_be_nan(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(td3, {"mean_return": 500.0, "std_return": math.nan}, make_target(1000.0))
    assert report.status == "scored"
    assert math.isnan(report.measured["std_return"])


# -- safety penalties -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "measured", "factor"),
    [
        ("linear", 0.0, 1.0),
        ("linear", 0.05, 0.75),
        ("linear", 0.2, 0.0),
        ("linear", 5.0, 0.0),
        ("step", 0.2, 1.0),
        ("step", 0.2001, 0.0),
    ],
)
def test_penalty_factor(kind: str, measured: float, factor: float) -> None:
    penalty = SafetyPenalty.model_validate({"metric": "c", "tolerance": 0.2, "kind": kind})
    assert penalty_factor(penalty, measured) == pytest.approx(factor)


def test_safety_penalty_scales_score(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    report = score(cost_task, {**GOOD_COST, "collision_rate": 0.05}, _cost_target(make_target))
    assert report.status == "scored"
    assert report.base_score == pytest.approx(0.5)
    assert report.score == pytest.approx(0.375)
    [p] = report.penalties
    assert (p.metric, p.measured, p.tolerance, p.kind) == ("collision_rate", 0.05, 0.2, "linear")
    assert p.factor == pytest.approx(0.75)
    assert report.score_line().endswith("lower is better, safety x0.750)")
    assert "Safety penalties: collision_rate 0.05 (tolerance 0.2, linear) x0.750." in (
        report.explanation
    )


def test_several_penalties_multiply(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    data = cost_task.model_dump(mode="json")
    data["metrics"].append(
        {"name": "joint_limit_rate", "direction": "lower_is_better", "role": "safety"}
    )
    data["scoring"]["safety"].append({"metric": "joint_limit_rate", "tolerance": 1.0})
    task = TaskSpec.model_validate(data)
    values = {**GOOD_COST, "collision_rate": 0.1, "joint_limit_rate": 0.2}
    report = score(task, values, _cost_target(make_target))
    assert [p.factor for p in report.penalties] == pytest.approx([0.5, 0.8])
    assert report.score == pytest.approx(0.5 * 0.5 * 0.8)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "collision_rate was not measured"),
        (math.nan, "collision_rate is nan"),
        (-0.1, "collision_rate is -0.1, but the task declares it cannot be negative"),
    ],
)
def test_unusable_safety_metric_scores_zero(
    cost_task: TaskSpec, make_target: MakeTarget, value: float | None, problem: str
) -> None:
    values = {k: v for k, v in GOOD_COST.items() if k != "collision_rate"}
    if value is not None:
        values["collision_rate"] = value
    report = score(cost_task, values, _cost_target(make_target))
    assert (report.status, report.score) == ("invalid_measurement", 0.0)
    assert report.problems == [problem]
    assert report.penalties[0].factor == 0.0


# -- conditions ------------------------------------------------------------------------------------


def test_condition_met(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    report = score(cost_task, {**GOOD_COST, "success_rate": 0.5}, _cost_target(make_target))
    assert report.status == "scored"
    [c] = report.conditions
    assert (c.metric, c.direction, c.threshold, c.measured, c.met) == (
        "success_rate",
        "at_least",
        0.5,
        0.5,
        True,
    )
    assert "Condition success_rate >= 0.5 met (0.5)." in report.explanation


def test_condition_unmet_zeroes_score(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    report = score(cost_task, {**GOOD_COST, "success_rate": 0.3}, _cost_target(make_target))
    assert (report.status, report.score) == ("condition_failed", 0.0)
    assert report.base_score == pytest.approx(0.5)
    assert report.score_line() == "score: 0.000 (condition failed: success_rate 0.3, needs >= 0.5)"
    assert report.explanation.startswith(  # the cause first, the paper's citation after it
        "Condition success_rate >= 0.5 not met (0.3). Score 0.000 because a condition is "
        "not met. Measured final_distance"
    )


def test_condition_at_most(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    from ale_robotics.tasks.scoring_config import Condition

    task = _with_scoring(
        cost_task, conditions=[Condition(metric="success_rate", threshold=0.5, direction="at_most")]
    )
    assert score(task, {**GOOD_COST, "success_rate": 0.5}, _cost_target(make_target)).score == 0.5
    assert score(task, {**GOOD_COST, "success_rate": 0.6}, _cost_target(make_target)).score == 0.0


def test_nan_condition_metric_is_never_met(cost_task: TaskSpec, make_target: MakeTarget) -> None:
    report = score(cost_task, {**GOOD_COST, "success_rate": math.nan}, _cost_target(make_target))
    assert (report.status, report.score) == ("invalid_measurement", 0.0)
    assert report.conditions[0].met is False


# -- the faithfulness gate -------------------------------------------------------------------------


def test_reproduction_passing_gate_scores(
    repro_task: TaskSpec, td3_target: PaperTarget, make_evidence: Evidence
) -> None:
    report = score(repro_task, {"mean_return": td3_target.value}, td3_target, make_evidence())
    assert report.status == "scored"
    assert report.score == pytest.approx(1.0)
    assert report.gate is not None and report.gate.passed
    assert (
        "Faithfulness gate passed (4 checks). Gate evidence: architecture verified on the "
        "policy tensors as the evaluator loaded them; algorithm_allowlist on the agent's "
        "declaration only (declared, not verified); budget verified on the evaluator's "
        "practice-step count and the harness's clock; learning_curve verified on the "
        "evaluator's own measurements." in report.explanation
    )


def test_the_forged_agent_scores_zero_naming_the_evaluator_evidence(
    repro_task: TaskSpec, td3_target: PaperTarget, make_evidence: Evidence
) -> None:
    """Issue 17's forgery (a random actor, meta.json claiming TD3 and 1M steps, a curve
    ramping to 4600) with a return that would otherwise score: the gate fails on what the
    evaluator observed (no practice step, no checkpoint)."""
    forged = make_evidence(evaluator=FORGED_EVALUATOR)
    report = score(repro_task, {"mean_return": td3_target.value}, td3_target, forged)
    assert (report.status, report.score) == ("gate_failed", 0.0)
    assert report.score_line() == (
        "score: 0.000 (faithfulness gate failed: budget: meta.json declares training_steps "
        "1,000,000, but the evaluator observed 0 practice steps)"
    )
    assert (
        "learning_curve: 0 practice steps observed; 0 checkpoints evaluated (at least 3 "
        "needed)" in report.explanation
    )
    assert "algorithm_allowlist on the agent's declaration only" in report.explanation


def test_reproduction_failing_gate_scores_zero(
    repro_task: TaskSpec,
    td3_target: PaperTarget,
    make_evidence: Evidence,
    td3_shapes: dict[str, list[int]],
) -> None:
    shapes = {k: v for k, v in td3_shapes.items() if k != "l3.bias"}
    measured = {"mean_return": td3_target.value}
    report = score(repro_task, measured, td3_target, make_evidence(shapes=shapes))
    assert (report.status, report.score) == ("gate_failed", 0.0)
    assert report.base_score == pytest.approx(1.0)  # still reported, for the record
    assert (
        report.score_line()
        == "score: 0.000 (faithfulness gate failed: architecture: missing l3.bias)"
    )
    assert report.explanation.startswith(  # the cause first, the paper's citation after it
        "Faithfulness gate failed: architecture: missing l3.bias. Score 0.000 because the "
        "faithfulness gate failed. Measured mean_return"
    )


def test_reproduction_without_evidence_fails_closed(
    repro_task: TaskSpec, td3_target: PaperTarget
) -> None:
    report = score(repro_task, {"mean_return": 1000.0}, td3_target)
    assert (report.status, report.score) == ("gate_failed", 0.0)
    assert report.score_line() == (
        "score: 0.000 (faithfulness gate failed: evidence: no submission evidence was given "
        "to the gate)"
    )


def test_gate_configured_on_benchmark_also_runs(
    td3: TaskSpec, repro_task: TaskSpec, td3_target: PaperTarget
) -> None:
    task = _with_scoring(td3, gate=repro_task.scoring.gate)
    report = score(task, {"mean_return": 1000.0}, td3_target, None)
    assert report.status == "gate_failed"


def test_benchmark_without_gate_has_no_gate_outcome(td3: TaskSpec, td3_target: PaperTarget) -> None:
    assert score(td3, {"mean_return": 1000.0}, td3_target).gate is None


def test_gate_failure_takes_precedence(repro_task: TaskSpec, td3_target: PaperTarget) -> None:
    report = score(repro_task, {"mean_return": math.nan}, td3_target, None)
    assert report.status == "gate_failed"
    assert report.problems == ["mean_return is nan"]
    assert "Unusable measurements: mean_return is nan." in report.explanation


def test_unscored_reproduction_still_reports_gate(repro_task: TaskSpec) -> None:
    report = score(repro_task, {"mean_return": 1000.0}, None, None)
    assert (report.status, report.score) == ("unscored", None)
    assert report.gate is not None and not report.gate.passed


# -- the report as data ----------------------------------------------------------------------------


def test_report_round_trips_as_strict_json(td3: TaskSpec, make_target: MakeTarget) -> None:
    report = score(td3, {"mean_return": math.nan, "std_return": math.inf}, make_target(1000.0))
    text = report.model_dump_json()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    again = ScoreReport.model_validate_json(text)
    assert again.model_dump_json() == text
    assert math.isnan(again.measured["mean_return"])
    assert "schema_version" not in json.loads(text)  # result.json's version covers it


def test_report_schema_is_strict_and_documented() -> None:
    assert ScoreReport.model_config.get("extra") == "forbid"
    undocumented = [n for n, f in ScoreReport.model_fields.items() if not f.description]
    assert undocumented == []
    with pytest.raises(ValueError, match="Extra inputs"):
        ScoreReport.model_validate({"surprise": 1})


def test_score_line_is_one_line(
    repro_task: TaskSpec, td3_target: PaperTarget, tmp_path: object
) -> None:
    report = score(repro_task, {"mean_return": 1.0}, td3_target, GateEvidence())
    line = report.score_line()
    assert line.startswith("score: 0.000 (faithfulness gate failed: ")
    assert "\n" not in line and "\n" not in report.explanation


# -- properties ------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(measured=anything, paper=paper_values, cap=caps, lower=st.booleans())
def test_score_is_bounded(
    td3: TaskSpec,
    cost_task: TaskSpec,
    make_target: MakeTarget,
    measured: float,
    paper: float,
    cap: float,
    lower: bool,
) -> None:
    if lower:
        task = _with_scoring(cost_task, cap=cap)
        report = score(
            task, {**GOOD_COST, "final_distance": measured}, _cost_target(make_target, paper)
        )
    else:
        report = score(_with_scoring(td3, cap=cap), {"mean_return": measured}, make_target(paper))
    assert report.score is not None
    assert 0.0 <= report.score <= cap


@settings(max_examples=300, deadline=None)
@given(a=finite, b=finite, paper=paper_values, lower=st.booleans())
def test_score_is_monotone_in_the_right_direction(
    td3: TaskSpec,
    cost_task: TaskSpec,
    make_target: MakeTarget,
    a: float,
    b: float,
    paper: float,
    lower: bool,
) -> None:
    lo, hi = sorted((a, b))

    def at(value: float) -> float:
        if lower:
            values = {**GOOD_COST, "final_distance": value}
            result = score(cost_task, values, _cost_target(make_target, paper)).score
        else:
            result = score(td3, {"mean_return": value}, make_target(paper)).score
        assert result is not None
        return result

    if lower and lo >= 0:  # over the valid (non-negative) domain of a cost
        assert at(lo) >= at(hi)
    elif not lower:
        assert at(lo) <= at(hi)


@settings(max_examples=300, deadline=None)
@given(
    distance=st.floats(min_value=0, max_value=10),
    collisions=anything,
    tolerance=st.floats(min_value=1e-3, max_value=10),
    kind=st.sampled_from(["linear", "step"]),
)
def test_penalties_never_raise_a_score(
    cost_task: TaskSpec,
    make_target: MakeTarget,
    distance: float,
    collisions: float,
    tolerance: float,
    kind: str,
) -> None:
    penalty = SafetyPenalty.model_validate(
        {"metric": "collision_rate", "tolerance": tolerance, "kind": kind}
    )
    task = _with_scoring(cost_task, safety=[penalty])
    target = _cost_target(make_target)
    clean = score(task, {**GOOD_COST, "final_distance": distance}, target)
    penalized = score(
        task, {**GOOD_COST, "final_distance": distance, "collision_rate": collisions}, target
    )
    assert clean.score is not None and penalized.score is not None
    assert penalized.score <= clean.score
    assert clean.base_score is not None and penalized.score <= clean.base_score
    assert all(0.0 <= p.factor <= 1.0 for p in penalized.penalties)


@settings(max_examples=200, deadline=None)
@given(measured=anything, broken=st.sampled_from(["none", "empty", "wrong_shapes"]))
def test_gate_failure_always_scores_zero(
    repro_task: TaskSpec,
    td3_target: PaperTarget,
    td3_shapes: dict[str, list[int]],
    measured: float,
    broken: str,
) -> None:
    evidence = {
        "none": None,
        "empty": GateEvidence(),
        "wrong_shapes": GateEvidence(tensor_shapes={k: [1] for k in td3_shapes}),
    }[broken]
    report = score(repro_task, {"mean_return": measured}, td3_target, evidence)
    assert report.status == "gate_failed"
    assert report.score == 0.0


@settings(max_examples=300, deadline=None)
@given(
    values=st.fixed_dictionaries(
        {"final_distance": anything, "collision_rate": anything, "success_rate": anything}
    ),
    nan_in=st.sampled_from(["final_distance", "collision_rate", "success_rate"]),
    target_value=st.none() | paper_values,
)
def test_nan_never_scores_above_zero(
    cost_task: TaskSpec,
    make_target: MakeTarget,
    values: dict[str, float],
    nan_in: str,
    target_value: float | None,
) -> None:
    values = {**values, nan_in: math.nan}
    target = None if target_value is None else _cost_target(make_target, target_value)
    report = score(cost_task, values, target)
    assert report.score is None or report.score == 0.0
    assert report.score is None or report.status == "invalid_measurement"


def test_numpy_scalars_are_numbers(td3: TaskSpec, make_target: MakeTarget) -> None:
    import numpy as np

    values = {"mean_return": np.float32(500.0), "std_return": np.int64(3)}
    report = score(td3, values, make_target(1000.0))  # type: ignore[arg-type]
    assert report.score == pytest.approx(0.5)
    assert report.measured == {"mean_return": 500.0, "std_return": 3.0}


def test_no_result_scores_zero_with_its_reason() -> None:
    from ale_robotics.tasks import default_registry

    reg = default_registry()
    task = reg.get("td3-inverted-pendulum-v1")
    report = score(task, {}, reg.target(task.id), no_result="no submission: the agent exited")
    assert report.status == "no_result"
    assert report.score == 0.0
    assert report.score_line() == "score: 0.000 (no submission: the agent exited)"
    # Issue 48.12: the cause opened the explanation only after the paper's citation
    # (8 lines of it at 80 columns); now it comes first, the measurement after it.
    assert report.explanation.startswith(
        "No result: no submission: the agent exited. Score 0.000 because the evaluator has "
        "no result for this run. Measured mean_return missing vs paper"
    )
    unscored = score(task, {}, None, no_result="no submission")
    assert unscored.status == "unscored" and unscored.score is None
