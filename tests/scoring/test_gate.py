"""The faithfulness gate: every check passes on good evidence and fails closed on bad."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ale_robotics.scoring import FaithfulnessGate, GateEvidence, GateOutcome, run_gate
from ale_robotics.scoring import gate as gate_module
from ale_robotics.tasks import TaskSpec

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
    assert "matches declared final_eval_return 1000" in outcome.checks[3].reason


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
    outcome = _run(repro_task, make_evidence(meta=None, curve=None, shapes=None))
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

    monkeypatch.setattr(gate_module, "_budget", boom)
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

    monkeypatch.setattr(gate_module, "_algorithm", boom)
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


# -- algorithm allow-list ----------------------------------------------------------------------


@pytest.mark.parametrize("declared", ["TD3", " td3 ", "Td3"])
def test_algorithm_allowed_ignoring_case_and_spaces(make_evidence: Evidence, declared: str) -> None:
    g = _gate({"kind": "algorithm_allowlist", "allowed": ["TD3", "DDPG"]})
    assert run_gate(g, make_evidence(meta={"algorithm": declared})).passed


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
    g = _gate({"kind": "algorithm_allowlist", "allowed": ["TD3"]})
    assert _failure(run_gate(g, make_evidence(meta=meta))).startswith(
        f"algorithm_allowlist: {reason}"
    )


def test_algorithm_reads_configured_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"method": "TD3"}))
    g = _gate(
        {"kind": "algorithm_allowlist", "file": "run.json", "field": "method", "allowed": ["TD3"]}
    )
    assert run_gate(g, GateEvidence(files={"run.json": tmp_path / "run.json"})).passed


def test_unreadable_paths_fail(tmp_path: Path) -> None:
    g = _gate({"kind": "algorithm_allowlist", "allowed": ["TD3"]})
    gone = GateEvidence(files={"meta.json": tmp_path / "nope.json"})
    assert _failure(run_gate(g, gone)) == (
        "algorithm_allowlist: meta.json is not a readable regular file"
    )
    a_dir = GateEvidence(files={"meta.json": tmp_path})
    assert _failure(run_gate(g, a_dir)) == (
        "algorithm_allowlist: meta.json is not a readable regular file"
    )


def test_oversized_evidence_fails(make_evidence: Evidence, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_module, "MAX_EVIDENCE_BYTES", 10)
    g = _gate({"kind": "algorithm_allowlist", "allowed": ["TD3"]})
    assert _failure(run_gate(g, make_evidence())) == (
        "algorithm_allowlist: meta.json is larger than 10 bytes"
    )


# -- budget ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [0, 1, 999_999, 1_000_000])
def test_budget_within(make_evidence: Evidence, steps: int) -> None:
    g = _gate({"kind": "budget", "max_steps": 1_000_000})
    outcome = run_gate(g, make_evidence(meta={"training_steps": steps}))
    assert outcome.passed, outcome


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        (1_000_001, "meta.json training_steps 1000001 exceeds the budget of 1000000"),
        (-5, "meta.json training_steps must not be negative, got -5"),
        (1e5, "meta.json training_steps must be an integer, got 100000.0"),
        (True, "meta.json training_steps must be an integer, got True"),
        ("100", "meta.json training_steps must be an integer, got '100'"),
        (None, "meta.json training_steps must be an integer, got None"),
    ],
)
def test_budget_fails_closed(make_evidence: Evidence, steps: object, reason: str) -> None:
    g = _gate({"kind": "budget", "max_steps": 1_000_000})
    assert (
        _failure(run_gate(g, make_evidence(meta={"training_steps": steps}))) == f"budget: {reason}"
    )


# -- learning curve ------------------------------------------------------------------------------


def test_curve_accepts_bom_blank_lines_extra_columns_and_crlf(make_evidence: Evidence) -> None:
    curve = "\ufeffwall_s,step,eval_return\r\n1.0,10,1.5\r\n\r\n2.0,20,2.5\r\n"
    outcome = run_gate(_curve_gate(), make_evidence(curve=curve))
    assert outcome.passed, outcome
    assert outcome.checks[0].reason == "2 rows, steps 10..20, final eval_return 2.5"


def test_curve_custom_columns(make_evidence: Evidence) -> None:
    g = _curve_gate(step_column="t", value_column="score")
    assert run_gate(g, make_evidence(curve="t,score\n1,0.5\n2,0.7\n")).passed
    assert not run_gate(g, make_evidence(curve="step,eval_return\n1,0.5\n2,0.7\n")).passed


@pytest.mark.parametrize(
    ("curve", "reason"),
    [
        (None, "curve.csv is not in the submission"),
        ("", "curve.csv is empty"),
        ("\n\n", "curve.csv is empty"),
        ("step,eval_return\n", "curve.csv has 0 data rows, at least 2 needed"),
        ("step,eval_return\n1,2\n", "curve.csv has 1 data rows, at least 2 needed"),
        ("step,return\n1,2\n2,3\n", "curve.csv header has no 'eval_return' column(s)"),
        ("step,eval_return,step\n1,2,1\n", "curve.csv header has 2 'step' column(s)"),
        ("step,eval_return\n1,2\n1,3\n", "curve.csv row 3: step 1 does not increase (previous 1)"),
        ("step,eval_return\n5,2\n4,3\n", "curve.csv row 3: step 4 does not increase (previous 5)"),
        ("step,eval_return\n1,2\n2,nan\n", "curve.csv row 3: eval_return is nan"),
        ("step,eval_return\n1,inf\n2,1\n", "curve.csv row 2: eval_return is inf"),
        ("step,eval_return\n1,abc\n2,1\n", "curve.csv row 2: 'abc' is not a number"),
        ("step,eval_return\n1e3,1\n2e3,1\n", "curve.csv row 2: step '1e3' is not a whole number"),
        ("step,eval_return\n-1,1\n2,1\n", "curve.csv row 2: step '-1' is not a whole number"),
        ("step,eval_return\n1,1\n2,1,9\n", "curve.csv row 3 has 3 cells, the header 2"),
        (
            "step,eval_return\n1,1\n1000001,1\n",
            "curve.csv last step 1000001 exceeds the budget of 1000000",
        ),
        (b"step,eval_return\n1,\xff\n", "curve.csv is not UTF-8 text"),
    ],
)
def test_curve_fails_closed(
    make_evidence: Evidence, curve: str | bytes | None, reason: str
) -> None:
    failure = _failure(run_gate(_curve_gate(), make_evidence(curve=curve)))
    assert failure.startswith(f"learning_curve: {reason}"), failure


def test_curve_step_limit_defaults_to_the_budget_check(make_evidence: Evidence) -> None:
    g = _gate({"kind": "budget", "max_steps": 100}, {"kind": "learning_curve"})
    curve = "step,eval_return\n50,1\n150,2\n"
    outcome = run_gate(g, make_evidence(meta={"training_steps": 100}, curve=curve))
    assert _failure(outcome) == "learning_curve: curve.csv last step 150 exceeds the budget of 100"


def test_curve_past_declared_training_steps_is_contradictory(make_evidence: Evidence) -> None:
    g = _gate({"kind": "budget", "max_steps": 1000}, {"kind": "learning_curve"})
    curve = "step,eval_return\n100,1\n600,2\n"
    outcome = run_gate(g, make_evidence(meta={"training_steps": 500}, curve=curve))
    assert _failure(outcome) == (
        "learning_curve: curve.csv last step 600 is past the declared training_steps 500"
    )


def test_curve_declared_final_value(make_evidence: Evidence) -> None:
    curve = "step,eval_return\n1,10\n2,100\n"
    absolute = _curve_gate(declared_final={"abs_tolerance": 5.0})
    assert run_gate(absolute, make_evidence(meta={"final_eval_return": 104.9}, curve=curve)).passed
    failure = _failure(
        run_gate(absolute, make_evidence(meta={"final_eval_return": 106}, curve=curve))
    )
    assert failure == (
        "learning_curve: curve.csv final eval_return 100 contradicts meta.json "
        "final_eval_return 106 (tolerance 5)"
    )
    relative = _curve_gate(declared_final={"rel_tolerance": 0.1})
    assert run_gate(relative, make_evidence(meta={"final_eval_return": 109}, curve=curve)).passed
    assert not run_gate(
        relative, make_evidence(meta={"final_eval_return": 112}, curve=curve)
    ).passed
    exact = _curve_gate(declared_final={})
    assert run_gate(exact, make_evidence(meta={"final_eval_return": 100}, curve=curve)).passed
    assert not run_gate(exact, make_evidence(meta={"final_eval_return": 100.5}, curve=curve)).passed


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({}, "meta.json has no 'final_eval_return' field"),
        ({"final_eval_return": "100"}, "meta.json final_eval_return must be a number, got '100'"),
        ('{"final_eval_return": 1e400}', "meta.json final_eval_return must be finite"),
        ('{"final_eval_return": Infinity}', "meta.json is not valid: non-finite number Infinity"),
    ],
)
def test_curve_declared_final_fails_closed(
    make_evidence: Evidence, meta: dict[str, Any] | str, reason: str
) -> None:
    g = _curve_gate(declared_final={"abs_tolerance": 5.0})
    curve = "step,eval_return\n1,10\n2,100\n"
    failure = _failure(run_gate(g, make_evidence(meta=meta, curve=curve)))
    assert failure.startswith(f"learning_curve: {reason}"), failure


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
        evidence = GateEvidence.from_directory(root, shapes)
        outcome = _run(repro_task, evidence)
    assert isinstance(outcome, GateOutcome)
    assert len(outcome.checks) == 4
    assert outcome.passed == all(c.passed for c in outcome.checks)
    assert not outcome.passed  # random bytes are never a faithful TD3 reproduction
