"""Build the gate's evidence from the official result and the harness's own measurements.

The faithfulness gate (:mod:`ale_robotics.scoring.gate`) imports neither the
evaluator nor the harness, so this module translates for it:

* the submission files the evaluator froze, each written out only when its
  bytes hash to the SHA-256 recorded at submission (a file that does not is left
  out, so the gate, which fails closed, reports it missing rather than trusting it);
* :class:`~ale_robotics.scoring.EvaluatorEvidence`: the evaluator's count of the
  run's practice steps (``EvalResult.training``), its learning curve
  (``EvalResult.learning_curve``, from the run's signed checkpoint events) and the
  SHA-256 of the submitted policy file (``EvalResult.submission_files``);
* :class:`~ale_robotics.scoring.HarnessEvidence` (:func:`harness_evidence`): the
  agent's wall clock as the harness timed it and its CPU time from its cgroup,
  against the task's budget in the release manifest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path

from ale_robotics.model.result import EvalResult
from ale_robotics.scoring import CurveEvidence, EvaluatorEvidence, GateEvidence, HarnessEvidence
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.registry import default_registry
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["evaluator_evidence", "gate_evidence", "harness_evidence", "submitted_policy_sha256"]


def gate_evidence(
    result: EvalResult,
    workdir: Path,
    *,
    task: TaskSpec | None = None,
    harness: HarnessEvidence | None = None,
) -> GateEvidence:
    """Write the result's evidence files into ``workdir`` and describe all of it for the gate.

    ``task`` names the contract's policy file (default: ``result.task_id`` in the
    bundled registry); ``harness`` is what the harness measured of the agent (None:
    nothing, and the budget check fails closed).
    """
    files: dict[str, Path] = {}
    for name, blob in result.evidence_files.items():
        try:
            data = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            continue
        if Path(name).name != name or hashlib.sha256(
            data
        ).hexdigest() != result.submission_files.get(name):
            continue
        path = workdir / name
        path.write_bytes(data)
        files[name] = path
    return GateEvidence(
        files=files,
        tensor_shapes=result.tensor_shapes or None,
        evaluator=evaluator_evidence(result, task),
        harness=harness,
    )


def evaluator_evidence(result: EvalResult, task: TaskSpec | None = None) -> EvaluatorEvidence:
    """What the evaluator observed of the run's training, as the result records it.

    ``practice_steps`` is None when the result carries no training count: the
    task keeps the simulator on the agent's side, so the evaluator saw none of it.
    """
    training = result.training
    return EvaluatorEvidence(
        practice_steps=None if training is None else training.agent_steps,
        practice_steps_budget=None if training is None else training.agent_steps_budget,
        curve=[
            CurveEvidence(
                practice_steps=p.practice_steps,
                mean_return=p.mean_return,
                policy_sha256=p.policy_sha256,
                episodes=p.episodes,
                std_return=p.std_return,
            )
            for p in result.learning_curve
        ],
        submitted_policy_sha256=submitted_policy_sha256(result, task),
    )


def submitted_policy_sha256(result: EvalResult, task: TaskSpec | None = None) -> str | None:
    """SHA-256 of the submission's policy file (the contract's policy role), as recorded at
    submission; None when the task has no policy role or not exactly one of its names is
    in the submission (the evaluator rejects that, so a scored result always has one)."""
    if task is None:
        registry = default_registry()
        if result.task_id not in registry:
            return None
        task = registry.get(result.task_id)
    if task.contract is None:
        return None
    try:
        names = task.contract.file_for_role("policy").names
    except KeyError:
        return None
    present = [result.submission_files[n] for n in names if n in result.submission_files]
    return present[0] if len(present) == 1 else None


def harness_evidence(
    *,
    agent_wall_s: float,
    run_budget_s: float,
    agent_cpu_s: float | None,
    manifest_entry: ManifestEntry | None,
) -> HarnessEvidence:
    """The harness's measurements of the agent against the task's budget.

    The wall-clock budget is the release manifest's ``compute_budget.wall_clock_s``
    (the task's rule), the run's own limit only for a task without a manifest
    entry: a ``--budget`` larger than the task's lets the agent run on, but not
    pass the gate on more time than the task allows. The CPU budget is the
    manifest's ``cpus`` over that wall clock, None where the task sets no ``cpus``
    (the CPU time is then reported, not judged).
    """
    budget = manifest_entry.compute_budget if manifest_entry is not None else None
    wall_budget = budget.wall_clock_s if budget is not None else run_budget_s
    cpus = budget.cpus if budget is not None else None
    return HarnessEvidence(
        wall_s=agent_wall_s,
        wall_budget_s=wall_budget,
        agent_cpu_s=agent_cpu_s,
        cpu_budget_s=None if cpus is None else cpus * wall_budget,
    )
