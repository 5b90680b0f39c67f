"""Scoring config models and :func:`check_scorable`: what makes a ratio meaningless is refused.

(Named ``test_scoring_config`` rather than ``test_config``: test modules share one
namespace in pytest's default import mode, so basenames must be unique in tests/.)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

import ale_robotics.scoring as scoring
from ale_robotics.errors import ConfigError
from ale_robotics.scoring import check_scorable, score
from ale_robotics.tasks import Direction, MetricSpec, PaperTarget, TaskSpec
from ale_robotics.tasks.scoring_config import (
    BudgetCheck,
    Condition,
    FaithfulnessGate,
    LearningCurveCheck,
    SafetyPenalty,
    ScoringConfig,
)

COST_ID = "reach-cost-v1"
MakeTarget = Callable[..., PaperTarget]


def _with_scoring(task: TaskSpec, **changes: Any) -> TaskSpec:
    """The task with scoring fields replaced, skipping validation (as model_copy does)."""
    return task.model_copy(update={"scoring": task.scoring.model_copy(update=changes)})


def _refused(task: TaskSpec, target: PaperTarget | None, field: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_scorable(task, target)
    message = str(info.value)
    assert message.startswith(f"task {task.id}: {field}: "), message
    assert why in message, message


# -- models ----------------------------------------------------------------------------------


def test_existing_configs_stay_valid(td3: TaskSpec) -> None:
    assert td3.scoring == ScoringConfig()
    assert td3.scoring.safety == []
    assert td3.scoring.conditions == []
    assert td3.scoring.gate is None
    assert (td3.scoring.cap, td3.scoring.eps) == (1.5, 1e-6)


@pytest.mark.parametrize("tolerance", [0.0, -1.0, math.nan, math.inf])
def test_safety_tolerance_must_be_positive_and_finite(tolerance: float) -> None:
    with pytest.raises(ValidationError):
        SafetyPenalty(metric="collision_rate", tolerance=tolerance)


def test_safety_defaults_and_kinds() -> None:
    assert SafetyPenalty(metric="m", tolerance=1).kind == "linear"
    assert (
        SafetyPenalty.model_validate({"metric": "m", "tolerance": 1, "kind": "step"}).kind == "step"
    )
    with pytest.raises(ValidationError):
        SafetyPenalty.model_validate({"metric": "m", "tolerance": 1, "kind": "quadratic"})


@pytest.mark.parametrize(
    "bad",
    [
        {"metric": "m", "threshold": math.nan},
        {"metric": "m", "threshold": 0.5, "direction": "above"},
        {"metric": "m", "threshold": 0.5, "extra": 1},
    ],
)
def test_condition_refuses(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Condition.model_validate(bad)


def test_condition_default_direction() -> None:
    assert Condition(metric="m", threshold=0.5).direction == "at_least"


@pytest.mark.parametrize(
    ("gate", "why"),
    [
        ({"checks": []}, "at least 1"),
        (
            {"checks": [{"kind": "budget", "max_steps": 1}, {"kind": "budget", "max_steps": 2}]},
            "names must be unique, budget repeated",
        ),
        ({"checks": [{"kind": "learning_curve"}]}, "learning_curve.max_step: required"),
        ({"checks": [{"kind": "vibes"}]}, "does not match any of the expected tags"),
        ({"checks": [{"kind": "budget", "max_steps": 0}]}, "greater than 0"),
        ({"checks": [{"kind": "algorithm_allowlist", "allowed": []}]}, "at least 1"),
        (
            {"checks": [{"kind": "architecture", "tensors": [{"key": "a", "shape": [1]}] * 2}]},
            "each tensor key may be listed once",
        ),
        ({"checks": [{"kind": "architecture", "tensors": [{"key": "a", "shape": [-1]}]}]}, "0"),
        ({"checks": [{"kind": "budget", "max_steps": 5, "surprise": True}]}, "Extra inputs"),
        (
            {"checks": [{"kind": "algorithm_allowlist", "allowed": ["TD3"]}]},
            "only declared checks (algorithm_allowlist)",
        ),
        (
            {"checks": [{"kind": "learning_curve", "max_step": 9, "declared_final": {}}]},
            "declared_final configured the agent-written curve (curve.csv)",
        ),
        ({"checks": [{"kind": "learning_curve", "max_step": 9, "min_points": 0}]}, "1"),
        ({"checks": [{"kind": "learning_curve", "max_step": 9, "max_gap_fraction": 0}]}, "0"),
        ({"checks": [{"kind": "learning_curve", "max_step": 9, "max_gap_fraction": 1.5}]}, "1"),
        (
            {"checks": [{"kind": "learning_curve", "max_step": 9, "max_gap_fraction": "nan"}]},
            "finite",
        ),
    ],
)
def test_gate_config_refuses(gate: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError) as info:
        FaithfulnessGate.model_validate(gate)
    assert why in str(info.value)


def test_gate_config_parses_each_kind_and_budget_limit() -> None:
    gate = FaithfulnessGate.model_validate(
        {
            "checks": [
                {"kind": "budget", "max_steps": 500, "name": "small"},
                {"kind": "budget", "max_steps": 100, "name": "smaller"},
                {"kind": "learning_curve"},
                {"kind": "architecture"},
                {"kind": "algorithm_allowlist", "allowed": ["TD3"]},
            ]
        }
    )
    assert [c.kind for c in gate.checks] == [
        "budget",
        "budget",
        "learning_curve",
        "architecture",
        "algorithm_allowlist",
    ]
    assert gate.budget_max_steps() == 100
    curve = gate.checks[2]
    assert isinstance(curve, LearningCurveCheck)
    assert (curve.min_points, curve.max_gap_fraction, curve.max_step) == (3, 0.5, None)


def test_the_repro_task_gates_on_evaluator_evidence() -> None:
    """td3-walker2d-repro-v1: architecture, the declared algorithm, the evaluator's step
    count and its learning curve of at least 3 checkpoints; curve.csv no longer required."""
    from ale_robotics.tasks import default_registry

    task = default_registry().get("td3-walker2d-repro-v1")
    assert task.scoring.gate is not None
    checks = {c.kind: c for c in task.scoring.gate.checks}
    assert sorted(checks) == ["algorithm_allowlist", "architecture", "budget", "learning_curve"]
    curve, budget = checks["learning_curve"], checks["budget"]
    assert isinstance(curve, LearningCurveCheck) and curve.min_points == 3
    assert isinstance(budget, BudgetCheck) and budget.max_steps == 1_000_000
    assert task.contract is not None
    assert not task.contract.file_for_role("curve").required
    assert task.contract.file_for_role("meta").required


def test_scoring_config_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ScoringConfig.model_validate({"cap": 1.5, "bonus": 2})


def test_public_api_is_exported() -> None:
    for name in scoring.__all__:
        assert getattr(scoring, name) is not None, name
    assert callable(scoring.score)
    assert scoring.ScoreReport.__name__ == "ScoreReport"
    with pytest.raises(AttributeError):
        _ = scoring.no_such_name


@pytest.mark.parametrize("first", ["ale_robotics.tasks", "ale_robotics.scoring"])
def test_import_order_does_not_matter(first: str) -> None:
    """tasks.spec and scoring both import tasks.scoring_config: either may come first."""
    import subprocess
    import sys

    code = (
        f"import {first}\n"
        "from ale_robotics.scoring import ScoreReport, score\n"
        "import ale_robotics.scoring.score\n"
        "from ale_robotics.scoring import score as again\n"
        "assert callable(score) and again is score and ScoreReport.__name__ == 'ScoreReport'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- check_scorable ----------------------------------------------------------------------------


def test_valid_tasks_are_scorable(
    td3: TaskSpec,
    td3_target: PaperTarget,
    cost_task: TaskSpec,
    repro_task: TaskSpec,
    make_target: MakeTarget,
) -> None:
    check_scorable(td3, td3_target)
    check_scorable(td3, None)
    check_scorable(cost_task, make_target(0.1, Direction.LOWER_IS_BETTER, "final_distance"))
    check_scorable(repro_task, td3_target)


@pytest.mark.parametrize("value", [0.0, -1000.0, math.nan, math.inf])
def test_refuses_non_positive_or_non_finite_paper_value(
    td3: TaskSpec, make_target: MakeTarget, value: float
) -> None:
    _refused(td3, make_target(value), "target.value", "must be positive and finite")


def test_refuses_target_direction_mismatch(td3: TaskSpec, make_target: MakeTarget) -> None:
    _refused(
        td3,
        make_target(1000.0, Direction.LOWER_IS_BETTER),
        "target.direction",
        "metric 'mean_return' is higher_is_better",
    )


def test_refuses_target_for_another_metric(td3: TaskSpec, make_target: MakeTarget) -> None:
    _refused(
        td3,
        make_target(1000.0, metric="std_return"),
        "target.metric",
        "the target is for 'std_return', the primary metric is 'mean_return'",
    )


def test_refuses_primary_that_can_be_negative(td3: TaskSpec, td3_target: PaperTarget) -> None:
    metrics = [m.model_copy(update={"can_be_negative": True}) for m in td3.metrics[:1]]
    task = td3.model_copy(update={"metrics": metrics + td3.metrics[1:]})
    _refused(task, td3_target, "metrics.mean_return.can_be_negative", "declare it as a cost")
    _refused(task, None, "metrics.mean_return.can_be_negative", "declare it as a cost")


def test_refuses_unknown_direction(td3: TaskSpec, td3_target: PaperTarget) -> None:
    odd = MetricSpec.model_construct(
        name="mean_return",
        direction="sideways",  # type: ignore[arg-type]
        role=td3.metrics[0].role,
        can_be_negative=False,
    )
    task = td3.model_copy(update={"metrics": [odd, *td3.metrics[1:]]})
    _refused(task, None, "metrics.mean_return.direction", "unknown direction 'sideways'")


@pytest.mark.parametrize(
    ("penalty", "field", "why"),
    [
        (
            SafetyPenalty(metric="crash_rate", tolerance=0.1),
            "metric",
            "unknown metric 'crash_rate'",
        ),
        (SafetyPenalty(metric="success_rate", tolerance=0.1), "metric", "has role condition"),
        (
            SafetyPenalty.model_construct(metric="collision_rate", tolerance=0.0, kind="linear"),
            "tolerance",
            "must be positive and finite, got 0.0",
        ),
        (
            SafetyPenalty.model_construct(metric="collision_rate", tolerance=-2.0, kind="linear"),
            "tolerance",
            "must be positive and finite, got -2.0",
        ),
    ],
)
def test_refuses_bad_safety_penalty(
    cost_task: TaskSpec, penalty: SafetyPenalty, field: str, why: str
) -> None:
    _refused(_with_scoring(cost_task, safety=[penalty]), None, f"scoring.safety[0].{field}", why)


def test_refuses_two_penalties_for_one_metric(cost_task: TaskSpec) -> None:
    twice = [SafetyPenalty(metric="collision_rate", tolerance=0.2)] * 2
    _refused(
        _with_scoring(cost_task, safety=twice),
        None,
        "scoring.safety[1].metric",
        "has two safety penalties",
    )


def _variant(task: TaskSpec, edit: Callable[[dict[str, Any]], object]) -> TaskSpec:
    """A validated copy of ``task`` after editing its JSON form."""
    data = copy.deepcopy(task.model_dump(mode="json"))
    edit(data)
    return TaskSpec.model_validate(data)


def test_refuses_safety_metric_that_is_not_a_cost(cost_task: TaskSpec) -> None:
    def higher(d: dict[str, Any]) -> None:
        d["metrics"][1]["direction"] = "higher_is_better"

    def negative(d: dict[str, Any]) -> None:
        d["metrics"][1]["can_be_negative"] = True

    for edit in (higher, negative):
        _refused(
            _variant(cost_task, edit),
            None,
            "scoring.safety[0].metric",
            "must be lower_is_better and non-negative",
        )


def test_refuses_safety_metric_without_penalty(cost_task: TaskSpec) -> None:
    _refused(
        _with_scoring(cost_task, safety=[]),
        None,
        "metrics.collision_rate.role",
        "a safety metric needs a scoring.safety penalty",
    )


def test_refuses_condition_on_unknown_metric(cost_task: TaskSpec) -> None:
    conditions = [*cost_task.scoring.conditions, Condition(metric="speed", threshold=1.0)]
    _refused(
        _with_scoring(cost_task, conditions=conditions),
        None,
        "scoring.conditions[1].metric",
        "unknown metric 'speed'",
    )


def test_refuses_condition_metric_without_condition(cost_task: TaskSpec) -> None:
    _refused(
        _with_scoring(cost_task, conditions=[]),
        None,
        "metrics.success_rate.role",
        "a condition metric needs a scoring.conditions entry",
    )


def test_refuses_non_finite_condition_threshold(cost_task: TaskSpec) -> None:
    bad = Condition.model_construct(metric="success_rate", threshold=math.nan, direction="at_least")
    _refused(
        _with_scoring(cost_task, conditions=[bad]),
        None,
        "scoring.conditions[0].threshold",
        "must be finite",
    )


@pytest.mark.parametrize(
    ("field", "value"), [("cap", math.inf), ("cap", math.nan), ("eps", math.inf)]
)
def test_refuses_non_finite_cap_or_eps(td3: TaskSpec, field: str, value: float) -> None:
    _refused(_with_scoring(td3, **{field: value}), None, f"scoring.{field}", "positive finite")


def test_refuses_reproduction_without_gate(repro_task: TaskSpec, td3_target: PaperTarget) -> None:
    _refused(
        _with_scoring(repro_task, gate=None),
        td3_target,
        "scoring.gate",
        "a reproduction task needs a faithfulness gate",
    )


def test_refuses_architecture_check_with_nothing_to_compare(cost_task: TaskSpec) -> None:
    gate = FaithfulnessGate.model_validate({"checks": [{"kind": "architecture"}]})
    _refused(
        _with_scoring(cost_task, gate=gate),
        None,
        "scoring.gate.checks.architecture.tensors",
        "the task contract has none",
    )


def test_score_refuses_what_check_scorable_refuses(td3: TaskSpec, make_target: MakeTarget) -> None:
    with pytest.raises(ConfigError, match=r"target\.value"):
        score(td3, {"mean_return": 950.0}, make_target(0.0))
