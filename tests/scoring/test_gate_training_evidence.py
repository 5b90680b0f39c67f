"""The learning-curve check wants evidence of training (issue 26), not only checkpoints.

Unit tests of its two rules and of the noise estimate they rest on: ``min_steps`` counted by
the last checkpoint, and a rise of the curve above its first point by more than
``min_improvement_se`` standard errors of the checkpoint episodes' pooled spread
(:mod:`ale_robotics.scoring.curve_noise`). The attack they close runs end to end in
tests/scoring/test_gate_hand_controller.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from gate_helpers import POLICY_SHA
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ale_robotics.errors import ConfigError
from ale_robotics.scoring import (
    CurveEvidence,
    EvaluatorEvidence,
    GateEvidence,
    GateOutcome,
    check_scorable,
    run_gate,
)
from ale_robotics.scoring.curve_noise import (
    CurveNoiseError,
    MeasuredPoint,
    improvement,
    pooled_spread,
)
from ale_robotics.tasks import TaskSpec, default_registry
from ale_robotics.tasks.scoring_config import FaithfulnessGate, LearningCurveCheck

Evidence = Callable[..., GateEvidence]

V3 = "td3-walker2d-repro-v3"


def _gate(**extra: Any) -> FaithfulnessGate:
    check = {"kind": "learning_curve", "max_step": 1_000_000, **extra}
    return FaithfulnessGate.model_validate({"checks": [check]})


def _ev(points: list[tuple[int, float, float]], episodes: int | None = 3) -> EvaluatorEvidence:
    """Checkpoints (practice steps, mean return, population std), the last one submitted."""
    curve = [
        CurveEvidence(
            practice_steps=n,
            mean_return=mean,
            policy_sha256=POLICY_SHA if i == len(points) - 1 else f"{i:064x}",
            episodes=episodes,
            std_return=None if episodes is None else std,
        )
        for i, (n, mean, std) in enumerate(points)
    ]
    return EvaluatorEvidence(
        practice_steps=points[-1][0],
        practice_steps_budget=1_000_000,
        curve=curve,
        submitted_policy_sha256=POLICY_SHA,
    )


def _reason(outcome: GateOutcome) -> str:
    (check,) = outcome.checks
    return check.reason


# -- the noise estimate ---------------------------------------------------------------------------


def test_the_spread_is_the_sample_std_pooled_over_the_points() -> None:
    # numpy's population std of [1, 2, 3] is sqrt(2/3); its sample variance is 1.
    one = MeasuredPoint(mean_return=2.0, std_return=math.sqrt(2 / 3), episodes=3)
    spread = pooled_spread([one])
    assert spread.dof == 2 and spread.std == pytest.approx(1.0)
    # [0, 4] and [0, 0, 6]: squared deviations 8 and 24 over 1 + 2 degrees of freedom.
    two = MeasuredPoint(mean_return=2.0, std_return=2.0, episodes=2)
    three = MeasuredPoint(mean_return=2.0, std_return=math.sqrt(8.0), episodes=3)
    spread = pooled_spread([two, three])
    assert spread.dof == 3 and spread.std == pytest.approx(math.sqrt(32 / 3))


def test_points_of_one_episode_add_no_spread() -> None:
    single = MeasuredPoint(mean_return=5.0, std_return=0.0, episodes=1)
    assert pooled_spread([single, MeasuredPoint(1.0, 1.0, 2)]).dof == 1
    with pytest.raises(CurveNoiseError, match="no checkpoint has two or more episodes"):
        pooled_spread([single, single])


@pytest.mark.parametrize(
    ("point", "match"),
    [
        (MeasuredPoint(math.nan, 1.0, 3), "non-finite return"),
        (MeasuredPoint(1.0, math.inf, 3), "non-finite return"),
        (MeasuredPoint(1.0, -1.0, 3), "negative std"),
        (MeasuredPoint(1.0, 1.0, 0), "0 episodes"),
    ],
)
def test_unusable_numbers_are_refused(point: MeasuredPoint, match: str) -> None:
    good = MeasuredPoint(0.0, 1.0, 3)
    with pytest.raises(CurveNoiseError, match=match):
        improvement([good, point], 2.0)


def test_the_improvement_is_the_best_later_point_over_the_first_in_standard_errors() -> None:
    points = [MeasuredPoint(10.0, 3.0, 3), MeasuredPoint(40.0, 3.0, 3), MeasuredPoint(30.0, 3.0, 3)]
    rise = improvement(points, 2.0)
    assert (rise.first, rise.best, rise.gain) == (0, 1, 30.0)
    s = math.sqrt(3 * 9 * 3 / 6)  # pooled sample std: each point's 27 over 2 dof
    assert rise.spread.std == pytest.approx(s) and rise.spread.dof == 6
    assert rise.standard_error == pytest.approx(s * math.sqrt(2 / 3))
    assert rise.margin == pytest.approx(2 * s * math.sqrt(2 / 3))
    assert rise.passed


def test_a_flat_curve_never_passes_even_without_noise() -> None:
    """A controller committed unchanged: the same returns at every checkpoint (the same seeds)."""
    same = MeasuredPoint(767.0, 0.0, 3)
    rise = improvement([same, same, same], 0.0)
    assert rise.gain == 0.0 and rise.margin == 0.0 and not rise.passed
    noisy = MeasuredPoint(767.0, 40.0, 3)
    assert not improvement([noisy, noisy, noisy], 2.0).passed


def test_an_improvement_needs_two_points_and_a_sane_k() -> None:
    p = MeasuredPoint(1.0, 1.0, 3)
    with pytest.raises(CurveNoiseError, match="1 checkpoints"):
        improvement([p], 2.0)
    for k in (-1.0, math.nan, math.inf):
        with pytest.raises(CurveNoiseError, match="k must be"):
            improvement([p, p], k)


@given(
    st.lists(
        st.tuples(st.floats(-1e6, 1e6), st.floats(0, 1e4), st.integers(1, 20)),
        min_size=2,
        max_size=8,
    ),
    st.floats(0, 10),
    st.floats(0, 1e4),
)
def test_raising_the_first_point_or_k_never_helps(
    raw: list[tuple[float, float, int]], k: float, lift: float
) -> None:
    points = [MeasuredPoint(m, s, n) for m, s, n in raw]
    if all(p.episodes < 2 for p in points):
        return
    rise = improvement(points, k)
    higher_first = [MeasuredPoint(points[0].mean_return + lift, *raw[0][1:]), *points[1:]]
    assert improvement(higher_first, k).gain <= rise.gain
    if not rise.passed:
        assert not improvement(higher_first, k).passed
        assert not improvement(points, k + lift).passed


# -- the gate's check -----------------------------------------------------------------------------


def test_the_last_checkpoint_needs_the_minimum_of_practice_steps(make_evidence: Evidence) -> None:
    points = [(1, 10.0, 1.0), (2, 500.0, 1.0), (3, 900.0, 1.0)]
    outcome = run_gate(_gate(min_steps=5000), make_evidence(evaluator=_ev(points)))
    assert not outcome.passed
    assert _reason(outcome) == (
        "the last checkpoint is at 3 practice steps, under the minimum of 5,000 (min_steps): "
        "too little training to show"
    )
    spread = [(2000, 10.0, 1.0), (4000, 500.0, 1.0), (5000, 900.0, 1.0)]
    outcome = run_gate(_gate(min_steps=5000), make_evidence(evaluator=_ev(spread)))
    assert outcome.passed, outcome
    assert _reason(outcome).endswith(
        "; the last is the submitted policy; at least 5,000 practice steps"
    )


def test_a_curve_that_does_not_rise_above_the_noise_fails(make_evidence: Evidence) -> None:
    flat = [(2000, 767.0, 40.0), (4000, 767.0, 40.0), (6000, 767.0, 40.0)]
    outcome = run_gate(_gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(flat)))
    assert _reason(outcome) == (
        "no rise above the episodes' noise: best later checkpoint 1 +0.0 over the first, "
        "margin 2 x SE 40.0 (episode spread 49.0, 6 dof)"
    )
    # 60 over the first is under 2 x 40.0; 90 is over it.
    small = [(2000, 700.0, 40.0), (4000, 760.0, 40.0), (6000, 740.0, 40.0)]
    assert not run_gate(_gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(small))).passed
    risen = [(2000, 700.0, 40.0), (4000, 760.0, 40.0), (6000, 790.0, 40.0)]
    outcome = run_gate(_gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(risen)))
    assert outcome.passed, outcome
    assert _reason(outcome).endswith(
        "; rises above the noise: best later checkpoint 2 +90.0 over the first, margin 2 x SE "
        "40.0 (episode spread 49.0, 6 dof)"
    )


def test_the_best_later_point_counts_not_only_the_last(make_evidence: Evidence) -> None:
    """TD3's curves dip: a peak well above the first point is training, a dip after it too."""
    dipped = [(2000, 2.0, 1.0), (4000, 900.0, 100.0), (6000, 400.0, 100.0)]
    assert run_gate(_gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(dipped))).passed


def test_both_faults_are_named_together(make_evidence: Evidence) -> None:
    attack = [(1, 767.0, 40.0), (2, 767.0, 40.0), (3, 767.0, 40.0)]
    gate = _gate(min_steps=5000, min_improvement_se=2.0)
    reason = _reason(run_gate(gate, make_evidence(evaluator=_ev(attack))))
    assert reason.startswith("the last checkpoint is at 3 practice steps, under the minimum")
    assert "; no rise above the episodes' noise: best later checkpoint 1 +0.0" in reason


def test_missing_spread_fails_closed(make_evidence: Evidence) -> None:
    points = [(2000, 2.0, 1.0), (4000, 500.0, 1.0), (6000, 900.0, 1.0)]
    outcome = run_gate(
        _gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(points, episodes=None))
    )
    assert _reason(outcome) == (
        "no improvement can be measured: checkpoint 0 has no per-episode spread in the evidence"
    )
    one = run_gate(_gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(points, episodes=1)))
    assert "no checkpoint has two or more episodes" in _reason(one)
    nan = [(2000, math.nan, 1.0), (4000, 500.0, 1.0), (6000, 900.0, 1.0)]
    outcome = run_gate(_gate(min_improvement_se=2.0), make_evidence(evaluator=_ev(nan)))
    assert not outcome.passed and "non-finite return" in _reason(outcome)


def test_without_the_new_settings_the_check_judges_as_before(make_evidence: Evidence) -> None:
    """A task version configured before them (v1, v2) keeps its recorded judgements."""
    attack = [(1, 767.0, 40.0), (2, 767.0, 40.0), (3, 767.0, 40.0)]
    assert run_gate(_gate(), make_evidence(evaluator=_ev(attack))).passed


def test_settings_that_could_never_pass_are_refused() -> None:
    with pytest.raises(ValidationError, match="min_steps: 2000 is over the step limit 1000"):
        FaithfulnessGate.model_validate(
            {"checks": [{"kind": "learning_curve", "max_step": 1000, "min_steps": 2000}]}
        )
    with pytest.raises(ValidationError, match="over the step limit 100"):
        FaithfulnessGate.model_validate(
            {
                "checks": [
                    {"kind": "budget", "max_steps": 100},
                    {"kind": "learning_curve", "min_steps": 200},
                ]
            }
        )
    with pytest.raises(ValidationError, match="needs min_points of 2 or more"):
        _gate(min_points=1, min_improvement_se=2.0)
    for bad in (-1.0, math.nan):
        with pytest.raises(ValidationError):
            _gate(min_improvement_se=bad)


def test_an_improvement_check_needs_checkpoints_of_two_episodes() -> None:
    reg = default_registry()
    task = reg.get(V3)
    assert task.training is not None and task.training.checkpoints is not None
    single = task.training.checkpoints.model_copy(update={"episodes": 1, "base_seeds": [7301]})
    lone = task.model_copy(
        update={"training": task.training.model_copy(update={"checkpoints": single})}
    )
    with pytest.raises(ConfigError, match=r"min_improvement_se: needs training\.checkpoints"):
        check_scorable(lone, reg.target(V3))


# -- the shipped configs --------------------------------------------------------------------------


def _curve_checks(task: TaskSpec) -> list[LearningCurveCheck]:
    gate = task.scoring.gate
    return [] if gate is None else [c for c in gate.checks if isinstance(c, LearningCurveCheck)]


def test_every_current_learning_curve_check_wants_evidence_of_training() -> None:
    """Invariant over the registry: a learning-curve check of a task that no newer version
    supersedes states both rules and their source; superseded ones keep their old gate."""
    reg = default_registry()
    current = []
    for entry in reg:
        if reg.superseded_by(entry.spec.id):
            continue
        for check in _curve_checks(entry.spec):
            assert check.min_steps is not None and check.min_improvement_se is not None
            assert check.note, entry.spec.id
            current.append(entry.spec.id)
    assert current == [V3]
    assert reg.superseded_by("td3-walker2d-repro-v2") == V3


def test_v3_is_v2_with_the_training_evidence() -> None:
    """The same measurement (so the same target); only the gate and the words differ."""
    reg = default_registry()
    v2, v3 = reg.get("td3-walker2d-repro-v2"), reg.get(V3)
    same = ("env", "contract", "metrics", "eval", "session", "training", "policy", "paper")
    assert all(getattr(v2, f) == getattr(v3, f) for f in same)
    (c2,), (c3,) = _curve_checks(v2), _curve_checks(v3)
    assert c3.model_copy(update={"min_steps": None, "min_improvement_se": None, "note": None}) == c2
    assert (c3.min_steps, c3.min_improvement_se) == (5000, 2.0)
    assert "bc98e6260e4e35e1a2afc1c78b6925251dd0a1e9" in (c3.note or "")
    manifest = reg.manifest
    assert manifest is not None
    assert manifest.tasks[V3].target == manifest.tasks["td3-walker2d-repro-v2"].target
