"""The faithfulness gate: every check passes on good evidence and fails closed on bad."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from gate_helpers import FORGED_EVALUATOR, HARNESS, POLICY_SHA
from hypothesis import given, settings
from hypothesis import strategies as st

from ale_robotics.scoring import (
    CurveEvidence,
    EvaluatorEvidence,
    GateEvidence,
    GateOutcome,
    HarnessEvidence,
    run_gate,
)
from ale_robotics.scoring import gate as gate_module
from ale_robotics.scoring import gate_checks as gate_checks_module
from ale_robotics.tasks import TaskSpec
from ale_robotics.tasks.scoring_config import AlgorithmAllowlistCheck, FaithfulnessGate

Evidence = Callable[..., GateEvidence]


def _gate(*checks: dict[str, Any]) -> FaithfulnessGate:
    return FaithfulnessGate.model_validate({"checks": list(checks)})


def _run(task: TaskSpec, evidence: GateEvidence | None) -> GateOutcome:
    assert task.contract is not None
    contract = {t.key: t.shape for t in task.contract.tensors}
    return run_gate(task.scoring.gate, evidence, contract_tensors=contract)


def _failure(outcome: GateOutcome) -> str:
    """'name: reason' of the only failed check (the test expects exactly one)."""
    failed = [c for c in outcome.checks if not c.passed]
    assert not outcome.passed
    assert len(failed) == 1, failed
    return f"{failed[0].name}: {failed[0].reason}"


def _curve_gate(**extra: Any) -> FaithfulnessGate:
    return _gate({"kind": "learning_curve", "max_step": 1_000_000, **extra})


def _ev(
    steps: list[int],
    *,
    practice: int | None = -1,
    budget: int | None = 1_000_000,
    last_sha: str = POLICY_SHA,
    submitted: str | None = POLICY_SHA,
) -> EvaluatorEvidence:
    """Evaluator evidence with checkpoints at ``steps`` (practice: the last step by default)."""
    curve = [
        CurveEvidence(practice_steps=n, mean_return=float(i), policy_sha256=f"{i:064x}")
        for i, n in enumerate(steps)
    ]
    if curve:
        curve[-1] = curve[-1].model_copy(update={"policy_sha256": last_sha})
    return EvaluatorEvidence(
        practice_steps=(steps[-1] if steps else 0) if practice == -1 else practice,
        practice_steps_budget=budget,
        curve=curve,
        submitted_policy_sha256=submitted,
    )


# -- the whole gate -----------------------------------------------------------------------------


def test_good_evidence_passes_every_check(repro_task: TaskSpec, make_evidence: Evidence) -> None:
    outcome = _run(repro_task, make_evidence())
    assert outcome.passed, outcome
    assert [c.name for c in outcome.checks] == [
        "architecture",
        "algorithm_allowlist",
        "budget",
        "learning_curve",
    ]
    assert all(c.passed for c in outcome.checks)
    assert outcome.first_failure is None
    assert [(c.evidence, c.verified) for c in outcome.checks] == [
        ("tensors", True),
        ("declared", False),
        ("evaluator", True),
        ("evaluator", True),
    ]
    assert outcome.checks[1].reason.startswith("declared, not verified: meta.json algorithm 'TD3'")
    assert outcome.checks[2].reason == (
        "1,000,000 practice steps observed by the evaluator, budget 1,000,000 (meta.json "
        "declares 1,000,000); harness: agent wall clock 3000.0 s of 3600 s, agent CPU 2900.0 s "
        "(no CPU budget)"
    )
    assert outcome.checks[3].reason == (
        "3 checkpoints evaluated by the evaluator at 400,000..1,000,000 practice steps (largest "
        "gap 400,000), mean return 2100.0 -> 4500.0; the last is the submitted policy"
    )
    assert outcome.evidence_text() == (
        "architecture verified on the policy tensors as the evaluator loaded them; "
        "algorithm_allowlist on the agent's declaration only (declared, not verified); "
        "budget verified on the evaluator's practice-step count and the harness's clock; "
        "learning_curve verified on the evaluator's own measurements"
    )


def test_the_forged_agent_fails_naming_the_evaluator_evidence(
    repro_task: TaskSpec, make_evidence: Evidence
) -> None:
    """Issue 17's forged agent: a random TD3-shaped actor, meta.json claiming TD3 and 1M
    steps, a curve.csv ramping to 4600, and not one practice step or checkpoint."""
    forged_curve = "step,eval_return\n" + "".join(
        f"{s},{4600 * s / 1_000_000:.1f}\n" for s in range(100_000, 1_000_001, 100_000)
    )
    outcome = _run(repro_task, make_evidence(curve=forged_curve, evaluator=FORGED_EVALUATOR))
    assert not outcome.passed
    verdict = {c.name: (c.passed, c.reason) for c in outcome.checks}
    assert verdict["architecture"][0]  # the shapes are right: a random actor of the right net
    assert verdict["algorithm_allowlist"][0]  # the claim is acceptable, and only declared
    assert verdict["budget"] == (
        False,
        "meta.json declares training_steps 1,000,000, but the evaluator observed 0 practice steps",
    )
    assert verdict["learning_curve"] == (
        False,
        "0 practice steps observed; 0 checkpoints evaluated (at least 3 needed)",
    )


def test_the_simulator_on_the_agents_side_is_no_evidence(
    repro_task: TaskSpec, make_evidence: Evidence
) -> None:
    none = EvaluatorEvidence(practice_steps=None, curve=[], submitted_policy_sha256=POLICY_SHA)
    outcome = _run(repro_task, make_evidence(evaluator=none))
    verdict = {c.name: c.reason for c in outcome.checks if not c.passed}
    assert verdict == {
        "budget": "the evaluator observed no training (simulator on the agent's side)",
        "learning_curve": "the evaluator observed no training (simulator on the agent's side); "
        "0 checkpoints evaluated (at least 3 needed)",
    }


def test_no_evaluator_or_harness_evidence_fails_closed(
    repro_task: TaskSpec, make_evidence: Evidence
) -> None:
    outcome = _run(repro_task, make_evidence(evaluator=None))
    verdict = {c.name: c.reason for c in outcome.checks if not c.passed}
    assert verdict == {
        "budget": "no evaluator evidence: the result says nothing of the training",
        "learning_curve": "no evaluator evidence: 0 checkpoints evaluated (at least 3 needed)",
    }
    outcome = _run(repro_task, make_evidence(harness=None))
    assert _failure(outcome) == "budget: no harness measurement of the agent's wall clock"


def test_declared_checks_alone_never_pass_the_gate(make_evidence: Evidence) -> None:
    declared = FaithfulnessGate.model_construct(  # the config refuses such a gate
        checks=[AlgorithmAllowlistCheck(allowed=["TD3"])]
    )
    outcome = run_gate(declared, make_evidence())
    assert not outcome.passed
    assert outcome.checks[0].passed and not outcome.checks[0].verified
    assert outcome.first_failure is not None
    assert outcome.first_failure.reason == (
        "no check passed on verified evidence (declared, not verified)"
    )


def test_no_gate_fails_closed() -> None:
    outcome = run_gate(None, GateEvidence())
    assert _failure(outcome) == "gate: no faithfulness gate is configured for this task"


def test_no_evidence_fails_closed(repro_task: TaskSpec) -> None:
    outcome = _run(repro_task, None)
    assert _failure(outcome) == "evidence: no submission evidence was given to the gate"


def test_gate_with_no_checks_fails_closed() -> None:
    empty = FaithfulnessGate.model_construct(checks=[])  # bypasses min_length=1
    assert _failure(run_gate(empty, GateEvidence())) == "gate: the faithfulness gate has no checks"


def test_all_checks_run_and_each_failure_is_named(
    repro_task: TaskSpec, make_evidence: Evidence
) -> None:
    outcome = _run(repro_task, make_evidence(meta=None, curve=None, shapes=None, evaluator=None))
    assert not outcome.passed
    assert [(c.name, c.passed) for c in outcome.checks] == [
        ("architecture", False),
        ("algorithm_allowlist", False),
        ("budget", False),
        ("learning_curve", False),
    ]
    assert outcome.first_failure is not None
    assert outcome.first_failure.reason == "no policy tensor shapes in the evidence"


def test_exception_inside_a_check_fails_that_check(
    repro_task: TaskSpec, make_evidence: Evidence, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: object) -> str:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(gate_module, "budget_check", boom)
    outcome = _run(repro_task, make_evidence())
    budget = next(c for c in outcome.checks if c.name == "budget")
    assert not outcome.passed
    assert not budget.passed
    assert budget.reason == "error in check: RuntimeError: disk on fire second line"
    assert sum(not c.passed for c in outcome.checks) == 1  # the others still ran and passed


def test_exception_outside_the_checks_never_escapes(
    repro_task: TaskSpec, make_evidence: Evidence, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: object) -> object:
        raise ValueError("bug")

    monkeypatch.setattr(gate_module, "_run_one", boom)
    outcome = _run(repro_task, make_evidence())
    assert _failure(outcome) == "gate: internal error: ValueError: bug"


def test_long_reasons_are_one_bounded_line(
    repro_task: TaskSpec, make_evidence: Evidence, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: object) -> str:
        raise RuntimeError("x\n" * 1000)

    monkeypatch.setattr(gate_module, "algorithm_check", boom)
    reason = _run(repro_task, make_evidence()).checks[1].reason
    assert "\n" not in reason
    assert len(reason) <= 400
    assert reason.endswith("...")


def test_from_directory_takes_regular_files(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    evidence = GateEvidence.from_directory(tmp_path, {"l1.weight": (4, 2)})
    assert evidence.files == {"meta.json": tmp_path / "meta.json"}
    assert evidence.tensor_shapes == {"l1.weight": [4, 2]}


# -- architecture ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda s: s.pop("l3.bias"), "missing l3.bias"),
        (lambda s: s.update({"l4.weight": [1, 1]}), "unexpected l4.weight"),
        (
            lambda s: s.update({"l1.weight": [64, 4]}),
            "l1.weight has shape [64, 4], expected [400, 4]",
        ),
        (lambda s: s.update({"l1.bias": []}), "l1.bias has shape [], expected [400]"),
    ],
)
def test_architecture_rejects_other_networks(
    repro_task: TaskSpec,
    make_evidence: Evidence,
    td3_shapes: dict[str, list[int]],
    change: Callable[[dict[str, list[int]]], object],
    reason: str,
) -> None:
    shapes = {k: list(v) for k, v in td3_shapes.items()}
    change(shapes)
    assert _failure(_run(repro_task, make_evidence(shapes=shapes))) == f"architecture: {reason}"


def test_architecture_without_shapes_fails(repro_task: TaskSpec, make_evidence: Evidence) -> None:
    outcome = _run(repro_task, make_evidence(shapes=None))
    assert _failure(outcome) == "architecture: no policy tensor shapes in the evidence"


def test_architecture_uses_its_own_tensor_list(make_evidence: Evidence) -> None:
    check = {"kind": "architecture", "tensors": [{"key": "w", "shape": [2, 3]}]}
    assert run_gate(_gate(check), make_evidence(shapes={"w": [2, 3]})).passed
    outcome = run_gate(_gate(check), make_evidence(shapes={"w": [3, 2]}))
    assert _failure(outcome) == "architecture: w has shape [3, 2], expected [2, 3]"


def test_architecture_without_expected_tensors_fails(make_evidence: Evidence) -> None:
    outcome = run_gate(_gate({"kind": "architecture"}), make_evidence(), contract_tensors=None)
    assert _failure(outcome) == (
        "architecture: no expected tensors: the check lists none and the contract has none"
    )


def test_architecture_lists_at_most_five_wrong_shapes(make_evidence: Evidence) -> None:
    tensors = [{"key": f"k{i}", "shape": [1]} for i in range(8)]
    shapes = {f"k{i}": [2] for i in range(8)}
    outcome = run_gate(
        _gate({"kind": "architecture", "tensors": tensors}), make_evidence(shapes=shapes)
    )
    assert _failure(outcome).endswith("and 3 more wrong shapes")


# -- algorithm allow-list: declared, never verified ---------------------------------------------

_W = {"w": [1]}


def _algo_gate(**extra: Any) -> FaithfulnessGate:
    """The allow-list next to one verified check (a gate of declared checks alone is refused)."""
    tensors = [{"key": "w", "shape": [1]}]
    return _gate(
        {"kind": "architecture", "tensors": tensors},
        {"kind": "algorithm_allowlist", "allowed": ["TD3"], **extra},
    )


@pytest.mark.parametrize("declared", ["TD3", " td3 ", "Td3"])
def test_algorithm_allowed_ignoring_case_and_spaces(make_evidence: Evidence, declared: str) -> None:
    g = _algo_gate(allowed=["TD3", "DDPG"])
    outcome = run_gate(g, make_evidence(meta={"algorithm": declared}, shapes=_W))
    assert outcome.passed
    check = outcome.checks[1]
    assert (check.passed, check.verified, check.evidence) == (True, False, "declared")
    assert check.reason.startswith(f"declared, not verified: meta.json algorithm {declared!r}")


def test_a_gate_of_declared_checks_only_is_refused() -> None:
    with pytest.raises(ValueError, match="only declared checks"):
        _gate({"kind": "algorithm_allowlist", "allowed": ["TD3"]})


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"algorithm": "SAC"}, "meta.json algorithm 'SAC' is not in the allow-list [TD3]"),
        ({"algorithm": ["TD3"]}, "meta.json algorithm must be a string, got ['TD3']"),
        ({"algo": "TD3"}, "meta.json has no 'algorithm' field"),
        (None, "meta.json is not in the submission"),
        ("[1, 2]", "meta.json must hold a JSON object, not list"),
        ("{not json", "meta.json is not valid JSON: "),
        ('{"algorithm": "TD3", "algorithm": "SAC"}', "meta.json is not valid: duplicate key"),
        ('{"algorithm": "TD3", "x": NaN}', "meta.json is not valid: non-finite number NaN"),
        (b'{"algorithm": "\xff"}', "meta.json is not UTF-8 text"),
    ],
)
def test_algorithm_fails_closed(
    make_evidence: Evidence, meta: dict[str, Any] | str | bytes | None, reason: str
) -> None:
    outcome = run_gate(_algo_gate(), make_evidence(meta=meta, shapes=_W))
    assert _failure(outcome).startswith(f"algorithm_allowlist: {reason}")
    assert outcome.checks[1].evidence == "declared" and not outcome.checks[1].verified


def test_algorithm_reads_configured_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"method": "TD3"}))
    g = _algo_gate(file="run.json", field="method")
    evidence = GateEvidence(files={"run.json": tmp_path / "run.json"}, tensor_shapes=_W)
    assert run_gate(g, evidence).passed


def test_unreadable_paths_fail(tmp_path: Path) -> None:
    g = _algo_gate()
    gone = GateEvidence(files={"meta.json": tmp_path / "nope.json"}, tensor_shapes=_W)
    assert _failure(run_gate(g, gone)) == (
        "algorithm_allowlist: meta.json is not a readable regular file"
    )
    a_dir = GateEvidence(files={"meta.json": tmp_path}, tensor_shapes=_W)
    assert _failure(run_gate(g, a_dir)) == (
        "algorithm_allowlist: meta.json is not a readable regular file"
    )


def test_oversized_evidence_fails(make_evidence: Evidence, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_checks_module, "MAX_EVIDENCE_BYTES", 10)
    assert _failure(run_gate(_algo_gate(), make_evidence(shapes=_W))) == (
        "algorithm_allowlist: meta.json is larger than 10 bytes"
    )


# -- budget: the evaluator's step count, the harness's clock -----------------------------------


def _budget_gate(**extra: Any) -> FaithfulnessGate:
    return _gate({"kind": "budget", "max_steps": 1_000_000, **extra})


@pytest.mark.parametrize("steps", [0, 1, 999_999, 1_000_000])
def test_budget_within(make_evidence: Evidence, steps: int) -> None:
    evidence = make_evidence(meta={"training_steps": steps}, evaluator=_ev([steps]))
    outcome = run_gate(_budget_gate(), evidence)
    assert outcome.passed, outcome
    assert outcome.checks[0].verified
    assert outcome.checks[0].reason.startswith(f"{steps:,} practice steps observed")


def test_budget_counts_the_evaluators_steps_not_the_declared_ones(make_evidence: Evidence) -> None:
    over = _ev([1_000_001], budget=None)
    outcome = run_gate(_budget_gate(), make_evidence(meta={"training_steps": 5}, evaluator=over))
    assert _failure(outcome) == (
        "budget: 1,000,001 practice steps observed, over the budget of 1,000,000"
    )


def test_budget_is_the_smaller_of_the_check_and_the_evaluators_limit(
    make_evidence: Evidence,
) -> None:
    evidence = make_evidence(meta={}, evaluator=_ev([600], budget=500))
    outcome = run_gate(_budget_gate(), evidence)
    assert _failure(outcome) == "budget: 600 practice steps observed, over the budget of 500"


@pytest.mark.parametrize(
    ("meta", "ok"),
    [
        ({"training_steps": 3000}, True),
        ({"training_steps": 2999}, True),  # counted differently, claims less: no contradiction
        ({}, True),
        ({"training_steps": "lots"}, True),  # unreadable: not used, not trusted
        ("[1]", True),
        ({"training_steps": 3001}, False),
        ({"training_steps": 1_000_000}, False),
    ],
)
def test_a_declaration_is_only_compared_never_trusted(
    make_evidence: Evidence, meta: dict[str, Any] | str, ok: bool
) -> None:
    outcome = run_gate(_budget_gate(), make_evidence(meta=meta, evaluator=_ev([3000])))
    assert outcome.passed is ok, outcome
    if not ok:
        assert _failure(outcome).startswith("budget: meta.json declares training_steps ")
        assert _failure(outcome).endswith("but the evaluator observed 3,000 practice steps")


def test_budget_without_a_declared_file_reads_none(make_evidence: Evidence) -> None:
    evidence = make_evidence(meta={"training_steps": 10**9}, evaluator=_ev([3000]))
    assert run_gate(_budget_gate(file=None), evidence).passed


@pytest.mark.parametrize(
    ("harness", "reason"),
    [
        (
            HarnessEvidence(wall_s=3600.5, wall_budget_s=3600, agent_cpu_s=1.0, cpu_budget_s=None),
            "the agent ran 3600.5 s by the harness's clock, over the wall-clock budget of 3600 s",
        ),
        (
            HarnessEvidence(
                wall_s=float("nan"), wall_budget_s=3600, agent_cpu_s=1.0, cpu_budget_s=None
            ),
            "the agent ran nan s by the harness's clock, over the wall-clock budget of 3600 s",
        ),
        (
            HarnessEvidence(wall_s=10, wall_budget_s=3600, agent_cpu_s=7300.0, cpu_budget_s=7200),
            "the agent used 7300.0 CPU seconds, over the budget of 7200",
        ),
    ],
)
def test_budget_fails_on_the_harness_measurements(
    make_evidence: Evidence, harness: HarnessEvidence, reason: str
) -> None:
    outcome = run_gate(_budget_gate(), make_evidence(harness=harness))
    assert _failure(outcome) == f"budget: {reason}"


@pytest.mark.parametrize(
    ("cpu", "cpu_budget", "said"),
    [
        (None, None, "agent CPU time not measured"),
        (None, 7200.0, "agent CPU time not measured"),
        (12.5, None, "agent CPU 12.5 s (no CPU budget)"),
        (12.5, 7200.0, "agent CPU 12.5 s of 7200 s"),
    ],
)
def test_cpu_time_is_reported_where_there_is_no_budget_or_no_measurement(
    make_evidence: Evidence, cpu: float | None, cpu_budget: float | None, said: str
) -> None:
    harness = HarnessEvidence(wall_s=10, wall_budget_s=60, agent_cpu_s=cpu, cpu_budget_s=cpu_budget)
    outcome = run_gate(_budget_gate(), make_evidence(harness=harness))
    assert outcome.passed, outcome
    assert outcome.checks[0].reason.endswith(f"agent wall clock 10.0 s of 60 s, {said}")


def test_budget_lists_every_problem(make_evidence: Evidence) -> None:
    harness = HarnessEvidence(wall_s=99, wall_budget_s=60, agent_cpu_s=None, cpu_budget_s=None)
    evidence = make_evidence(
        meta={"training_steps": 2_000_000}, evaluator=_ev([1_500_000], budget=None), harness=harness
    )
    assert _failure(run_gate(_budget_gate(), evidence)) == (
        "budget: 1,500,000 practice steps observed, over the budget of 1,000,000; meta.json "
        "declares training_steps 2,000,000, but the evaluator observed 1,500,000 practice "
        "steps; the agent ran 99.0 s by the harness's clock, over the wall-clock budget of 60 s"
    )


# -- learning curve: the evaluator-measured checkpoints ------------------------------------------


@pytest.mark.parametrize(
    "steps",
    [
        [1000, 2000, 3000],
        [0, 1000, 2000],  # a checkpoint of the untrained policy is a point too
        [400, 800, 1200, 1600, 2000],
        [100, 200, 200, 300],  # committed twice at one count: no extra point, no fault
        [1000, 1500, 2000],  # the first gap 1000 is exactly half the last point's steps
    ],
)
def test_a_curve_spread_over_the_training_passes(make_evidence: Evidence, steps: list[int]) -> None:
    outcome = run_gate(_curve_gate(), make_evidence(evaluator=_ev(steps)))
    assert outcome.passed, outcome
    assert outcome.checks[0].evidence == "evaluator" and outcome.checks[0].verified


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        ([], "0 practice steps observed; 0 checkpoints evaluated (at least 3 needed)"),
        (
            [1000, 2000],
            "2,000 practice steps observed; 2 checkpoints evaluated (at least 3 needed)",
        ),
        (
            [1000, 1000, 1000],
            "1,000 practice steps observed; 3 checkpoints evaluated at 1 distinct practice-step "
            "counts (at least 3 needed)",
        ),
        (
            [1000, 3000, 2000],
            "checkpoint 2 was evaluated at 2,000 practice steps, before checkpoint 1 at 3,000: "
            "the evaluator's count cannot decrease",
        ),
        (
            [10, 20, 3000],
            "a gap of 2,980 practice steps between checkpoints 1 and 2 (20 and 3,000) is more "
            "than 0.5 of the last checkpoint's 3,000: the checkpoints are not spread over the "
            "training",
        ),
        (
            [2000, 2500, 3000],
            "a gap of 2,000 practice steps before checkpoint 0 (at 2,000) is more than 0.5 of "
            "the last checkpoint's 3,000: the checkpoints are not spread over the training",
        ),
        (
            [500_000, 800_000, 1_000_001],
            "checkpoint 2 was evaluated at 1,000,001 practice steps, over the budget of 1,000,000",
        ),
    ],
)
def test_a_curve_that_shows_no_training_fails(
    make_evidence: Evidence, steps: list[int], reason: str
) -> None:
    outcome = run_gate(_curve_gate(), make_evidence(evaluator=_ev(steps, budget=None)))
    assert _failure(outcome) == f"learning_curve: {reason}"


def test_the_last_checkpoint_must_be_the_submitted_policy(make_evidence: Evidence) -> None:
    other = "cd" * 32
    outcome = run_gate(_curve_gate(), make_evidence(evaluator=_ev([1, 2, 3], last_sha=other)))
    assert _failure(outcome) == (
        "learning_curve: the last checkpoint (2, at 3 practice steps, policy sha256 "
        f"{other[:12]}) is not the submitted policy (sha256 {POLICY_SHA[:12]})"
    )
    unknown = make_evidence(evaluator=_ev([1, 2, 3], submitted=None))
    assert _failure(run_gate(_curve_gate(), unknown)) == (
        "learning_curve: the submitted policy's SHA-256 is unknown, so the last checkpoint "
        "cannot be matched to it"
    )


def test_an_earlier_checkpoint_of_the_submitted_policy_is_not_enough(
    make_evidence: Evidence,
) -> None:
    """Training on after the submitted policy's checkpoint: the curve does not end at it."""
    ev = _ev([1000, 2000, 3000])
    shuffled = ev.model_copy(
        update={
            "curve": [
                ev.curve[0],
                ev.curve[2].model_copy(update={"practice_steps": 2000}),
                ev.curve[1].model_copy(update={"practice_steps": 3000}),
            ]
        }
    )
    assert not run_gate(_curve_gate(), make_evidence(evaluator=shuffled)).passed


def test_curve_settings(make_evidence: Evidence) -> None:
    steps = [100, 200, 300, 400, 1000]  # last gap 600 of 1000
    assert not run_gate(_curve_gate(), make_evidence(evaluator=_ev(steps))).passed
    loose = _curve_gate(max_gap_fraction=0.6)
    assert run_gate(loose, make_evidence(evaluator=_ev(steps))).passed
    five = _curve_gate(min_points=6, max_gap_fraction=1.0)
    assert _failure(run_gate(five, make_evidence(evaluator=_ev(steps)))).endswith(
        "5 checkpoints evaluated (at least 6 needed)"
    )


def test_curve_step_limit_defaults_to_the_budget_check(make_evidence: Evidence) -> None:
    g = _gate({"kind": "budget", "max_steps": 100}, {"kind": "learning_curve"})
    evidence = make_evidence(meta={}, evaluator=_ev([50, 100, 150], practice=90, budget=None))
    outcome = run_gate(g, evidence)
    assert {c.name: c.reason for c in outcome.checks} == {
        "budget": "90 practice steps observed by the evaluator, budget 100; harness: agent wall "
        "clock 3000.0 s of 3600 s, agent CPU 2900.0 s (no CPU budget)",
        "learning_curve": "checkpoint 2 was evaluated at 150 practice steps, over the budget "
        "of 100",
    }


def test_agent_written_curve_settings_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="can no longer make the check pass"):
        _gate({"kind": "learning_curve", "max_step": 10, "file": "curve.csv", "min_rows": 2})


# -- doing less or saying more never pays -----------------------------------------------------

_steps = st.lists(st.integers(0, 300_000), max_size=8).map(lambda d: list(accumulate(d)))
"""Checkpoint step counts as the evaluator records them: never decreasing, often spread."""
_meta = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "algorithm": st.sampled_from(["TD3", "td3", "SAC", ""]) | st.text(max_size=5),
        "training_steps": st.integers(-5, 2_000_000) | st.floats() | st.text(max_size=3),
        "final_eval_return": st.floats(allow_nan=False) | st.just(4600.0),
    },
)
_curve_csv = st.none() | st.just("step,eval_return\n1000000,4600\n") | st.text(max_size=60)


@settings(max_examples=150, deadline=None)
@given(steps=_steps, meta=_meta, curve=_curve_csv)
def test_what_the_agent_writes_never_makes_the_gate_pass(
    repro_task: TaskSpec, steps: list[int], meta: dict[str, Any] | None, curve: str | None
) -> None:
    """Whatever meta.json and curve.csv say, the gate passes only if it passes with the
    plain honest declaration ('TD3', the evaluator's count) and no curve.csv at all."""
    evaluator = _ev(steps, budget=None)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        claimed = _files(root / "claimed", meta, curve)
        honest = _files(root / "honest", {"algorithm": "TD3"}, None)
        said_more = _run(repro_task, _with(claimed, evaluator))
        plain = _run(repro_task, _with(honest, evaluator))
    assert not said_more.passed or plain.passed
    for a, b in zip(said_more.checks, plain.checks, strict=True):  # only declared checks move
        if a.kind in ("architecture", "learning_curve"):
            assert (a.passed, a.reason) == (b.passed, b.reason)


@settings(max_examples=150, deadline=None)
@given(steps=_steps, drop=st.sets(st.integers(0, 7)))
def test_fewer_checkpoints_never_pass_where_more_fail(
    repro_task: TaskSpec, steps: list[int], drop: set[int]
) -> None:
    """Leaving out checkpoints (all but the last, the submitted policy) never turns a failed
    gate into a passed one: committing more of them never hurts."""
    full = _ev(steps, budget=None)
    kept = [p for i, p in enumerate(full.curve) if i not in drop or i == len(full.curve) - 1]
    fewer = full.model_copy(update={"curve": kept})
    with tempfile.TemporaryDirectory() as d:
        files = _files(Path(d) / "files", {"algorithm": "TD3"}, None)
        more = _run(repro_task, _with(files, full))
        less = _run(repro_task, _with(files, fewer))
    assert not less.passed or more.passed


def _files(root: Path, meta: dict[str, Any] | None, curve: str | None) -> dict[str, Path]:
    root.mkdir()
    files: dict[str, Path] = {}
    if meta is not None:
        (root / "meta.json").write_text(json.dumps(meta))
        files["meta.json"] = root / "meta.json"
    if curve is not None:
        (root / "curve.csv").write_text(curve)
        files["curve.csv"] = root / "curve.csv"
    return files


def _with(files: dict[str, Path], evaluator: EvaluatorEvidence) -> GateEvidence:
    shapes = {"l1.weight": [400, 4], "l1.bias": [400], "l2.weight": [300, 400]}
    shapes |= {"l2.bias": [300], "l3.weight": [1, 300], "l3.bias": [1]}
    return GateEvidence(files=files, tensor_shapes=shapes, evaluator=evaluator, harness=HARNESS)


# -- never raises, whatever the agent wrote -------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    meta=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode()),
    curve=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode()),
    shapes=st.none()
    | st.dictionaries(st.text(max_size=8), st.lists(st.integers(0, 500), max_size=3), max_size=4),
)
def test_gate_never_raises_on_arbitrary_evidence(
    repro_task: TaskSpec, meta: bytes, curve: bytes, shapes: dict[str, list[int]] | None
) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "meta.json").write_bytes(meta)
        (root / "curve.csv").write_bytes(curve)
        evidence = GateEvidence.from_directory(
            root, shapes, evaluator=FORGED_EVALUATOR, harness=HARNESS
        )
        outcome = _run(repro_task, evidence)
    assert isinstance(outcome, GateOutcome)
    assert len(outcome.checks) == 4
    assert not outcome.passed  # no checkpoint: never a faithful TD3 reproduction
    assert not outcome.checks[3].passed
