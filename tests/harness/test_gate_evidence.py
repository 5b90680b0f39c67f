"""harness/evidence.py: the gate's evidence is the evaluator's record and the harness's clock.

Built from real EvalResults (``data/plot_results.json``) given what the evaluator records
for td3-walker2d-repro-v1 (submission hashes, frozen evidence files, a training count and a
learning curve); the gate's verdict over it is checked too, so that a wrong translation
(the agent's file read instead of the evaluator's count, a curve point dropped, the wrong
file's hash taken as the policy's) shows as a wrong verdict.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from ale_robotics.harness.evidence import gate_evidence, harness_evidence
from ale_robotics.model.result import CurvePoint, EvalResult, TrainingUsage
from ale_robotics.scoring import GateEvidence, GateOutcome, run_gate
from ale_robotics.tasks import default_registry
from ale_robotics.tasks.manifest import ComputeBudget, ManifestEntry

DATA = Path(__file__).parent / "data" / "plot_results.json"
REPRO = "td3-walker2d-repro-v1"
POLICY = b"policy bytes"
META = json.dumps({"algorithm": "TD3", "training_steps": 1500}).encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _result(*, training: TrainingUsage | None, last_sha: str = _sha(POLICY)) -> EvalResult:
    base = EvalResult.model_validate(json.loads(DATA.read_text())["return"]["eval_result"])
    task = default_registry().get(REPRO)
    assert task.contract is not None
    curve = [
        CurvePoint(
            index=i,
            checkpoint_id=f"ck{i}",
            practice_steps=s,
            policy_sha256=_sha(f"policy {i}".encode()) if i < 2 else last_sha,
            episodes=3,
            mean_return=10.0 * i,
            std_return=1.0,
        )
        for i, s in enumerate([500, 1000, 1500])
    ]
    return base.model_copy(
        update={
            "task_id": REPRO,
            "submission_files": {"policy.safetensors": _sha(POLICY), "meta.json": _sha(META)},
            "evidence_files": {"meta.json": base64.b64encode(META).decode()},
            "tensor_shapes": {t.key: list(t.shape) for t in task.contract.tensors},
            "training": training,
            "learning_curve": curve,
        }
    )


def _gate(evidence: GateEvidence) -> GateOutcome:
    task = default_registry().get(REPRO)
    assert task.contract is not None
    contract = {t.key: t.shape for t in task.contract.tensors}
    return run_gate(task.scoring.gate, evidence, contract_tensors=contract)


HARNESS = harness_evidence(
    agent_wall_s=20.0, run_budget_s=7200.0, agent_cpu_s=15.0, manifest_entry=None
)


def test_the_evaluators_record_becomes_the_evidence(tmp_path: Path) -> None:
    result = _result(training=TrainingUsage(agent_steps=1500, agent_steps_budget=1_000_000))
    evidence = gate_evidence(result, tmp_path, harness=HARNESS)
    ev = evidence.evaluator
    assert ev is not None
    assert (ev.practice_steps, ev.practice_steps_budget) == (1500, 1_000_000)
    assert [p.practice_steps for p in ev.curve] == [500, 1000, 1500]
    assert ev.submitted_policy_sha256 == _sha(POLICY)  # the policy's, not meta.json's
    assert evidence.harness == HARNESS
    assert evidence.files == {"meta.json": tmp_path / "meta.json"}
    outcome = _gate(evidence)
    assert outcome.passed, outcome


def test_no_training_count_means_the_evaluator_saw_none(tmp_path: Path) -> None:
    evidence = gate_evidence(_result(training=None), tmp_path, harness=HARNESS)
    assert evidence.evaluator is not None and evidence.evaluator.practice_steps is None
    outcome = _gate(evidence)
    budget = next(c for c in outcome.checks if c.name == "budget")
    assert budget.reason == "the evaluator observed no training (simulator on the agent's side)"


def test_a_curve_ending_elsewhere_is_not_the_submission(tmp_path: Path) -> None:
    result = _result(training=TrainingUsage(agent_steps=1500), last_sha="ee" * 32)
    evidence = gate_evidence(result, tmp_path, harness=HARNESS)
    outcome = _gate(evidence)
    curve = next(c for c in outcome.checks if c.name == "learning_curve")
    assert not curve.passed and "is not the submitted policy" in curve.reason


def test_a_tampered_evidence_file_is_left_out(tmp_path: Path) -> None:
    result = _result(training=TrainingUsage(agent_steps=1500))
    forged = base64.b64encode(b'{"algorithm": "TD3", "training_steps": 1}').decode()
    tampered = result.model_copy(update={"evidence_files": {"meta.json": forged}})
    assert gate_evidence(tampered, tmp_path).files == {}


def test_the_wall_budget_is_the_tasks_not_an_operators_override() -> None:
    entry = ManifestEntry(
        version=1,
        config_sha256="0" * 64,
        compute_budget=ComputeBudget(wall_clock_s=7200, cpus=2.0),
    )
    measured = harness_evidence(
        agent_wall_s=9000.0, run_budget_s=99_999.0, agent_cpu_s=None, manifest_entry=entry
    )
    assert (measured.wall_budget_s, measured.cpu_budget_s) == (7200, 14_400.0)
    without = harness_evidence(
        agent_wall_s=1.0, run_budget_s=60.0, agent_cpu_s=0.5, manifest_entry=None
    )
    assert (without.wall_budget_s, without.cpu_budget_s, without.agent_cpu_s) == (60.0, None, 0.5)
