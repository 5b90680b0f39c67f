"""The faithfulness gate: did a reproduction follow the paper's method?

A reproduction-genre task scores only when its submission shows the paper's
method (docs/architecture.md#scoring). The checks are declared in the task config
(:class:`~ale_robotics.tasks.scoring_config.FaithfulnessGate`) and run here over
:class:`GateEvidence`, and every check says what it rests on
(:attr:`CheckResult.evidence`), because a check is only as strong as its evidence
(docs/architecture.md#rules-a-score-must-obey):

* ``architecture``: the policy's tensor shapes as the evaluator loaded them;
* ``budget``: the evaluator's own count of the run's practice steps, and the
  harness's measurements of the agent's wall clock and CPU time;
* ``learning_curve``: the evaluator-measured curve, one point per checkpoint the
  agent committed while training, each evaluated by the evaluator at its own
  practice-step count;
* ``algorithm_allowlist``: only what the agent declares in ``meta.json``. Nothing
  observed shows which algorithm produced a set of weights, so this check is
  "declared, not verified": a value outside the list fails it, a value inside
  never counts as verified.

Agent-written files (``meta.json``, ``curve.csv``) may be read and compared, but
never make a check pass on their own: :attr:`GateOutcome.passed` needs every check
not failed *and* at least one check passed on verified evidence.

The gate fails closed. Missing, unreadable, malformed or contradictory evidence
fails the check that needed it, with the check named and the reason; an
exception raised inside a check fails that check too. :func:`run_gate` never
raises (short of ``KeyboardInterrupt``/``SystemExit``, which are not errors of
the gate): part of the evidence is written by an untrusted agent, so every way of
breaking a parser must end in "failed", never in "skipped" or a crash that a
caller might mishandle. This module imports neither the evaluator nor the
harness: they build the evidence models below from what they measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.scoring.gate_checks import (
    EvidenceError,
    algorithm_check,
    architecture_check,
    budget_check,
    learning_curve_check,
    one_line,
)
from ale_robotics.tasks.scoring_config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    FaithfulnessGate,
    LearningCurveCheck,
    check_name,
)

__all__ = [
    "EVIDENCE_WORDS",
    "CheckResult",
    "CurveEvidence",
    "EvaluatorEvidence",
    "EvidenceKind",
    "GateEvidence",
    "GateOutcome",
    "HarnessEvidence",
    "run_gate",
]

_Check = ArchitectureCheck | AlgorithmAllowlistCheck | BudgetCheck | LearningCurveCheck

EvidenceKind = Literal["evaluator", "harness", "tensors", "declared"]
"""What a check rests on: the evaluator's own measurements, the harness's, the policy
tensors as the evaluator loaded them, or only what the agent declared."""

EVIDENCE_WORDS: dict[str, str] = {
    "evaluator": "the evaluator's own measurements",
    "harness": "the harness's measurements",
    "tensors": "the policy tensors as the evaluator loaded them",
    "declared": "the agent's declaration only (declared, not verified)",
}
"""Each evidence kind in words, for the report."""

_EVIDENCE_OF: dict[str, EvidenceKind] = {
    "architecture": "tensors",
    "budget": "evaluator",
    "learning_curve": "evaluator",
    "algorithm_allowlist": "declared",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CurveEvidence(_Model):
    """One point of the evaluator-measured learning curve: a checkpoint as it evaluated it."""

    practice_steps: int = Field(
        ge=0, description="The evaluator's count of the run's practice steps at the checkpoint."
    )
    mean_return: float = Field(
        description="Mean return of the checkpoint over the evaluator's hidden-seed episodes."
    )
    policy_sha256: str = Field(description="SHA-256 of the checkpoint's policy file.")
    episodes: int | None = Field(
        default=None,
        ge=0,
        description="How many episodes the mean is over; None: not given (an improvement "
        "check then fails, it cannot estimate the noise).",
    )
    std_return: float | None = Field(
        default=None,
        description="Population standard deviation of those episode returns; None: not given.",
    )


class EvaluatorEvidence(_Model):
    """What the evaluator itself observed of the run's training."""

    practice_steps: int | None = Field(
        ge=0,
        description="The evaluator's count of the run's practice steps; None when it counted "
        "none because the task keeps the simulator on the agent's side.",
    )
    practice_steps_budget: int | None = Field(
        default=None, ge=0, description="The training budget it enforced, in practice steps."
    )
    curve: list[CurveEvidence] = Field(
        default_factory=list,
        description="The evaluator-measured learning curve: the committed checkpoints in order.",
    )
    submitted_policy_sha256: str | None = Field(
        description="SHA-256 of the policy file of the submission that was scored; None when "
        "unknown (the curve's last point then cannot be matched to it)."
    )


class HarnessEvidence(_Model):
    """What the harness measured of the agent."""

    wall_s: float = Field(
        description="The agent's wall-clock seconds as the harness timed them (frozen time "
        "excluded, as from the budget)."
    )
    wall_budget_s: float = Field(gt=0, description="The task's wall-clock budget for the agent.")
    agent_cpu_s: float | None = Field(
        description="CPU seconds of all the agent's processes (its cgroup); None: not measured."
    )
    cpu_budget_s: float | None = Field(
        description="The most CPU seconds the task's budget allows; None: it sets no CPU budget."
    )


class GateEvidence(_Model):
    """What the gate may look at.

    The evaluator's snapshot of the submission files (never the agent's live
    volume) and the policy's tensor shapes as the evaluator loaded them, plus what
    the evaluator (:class:`EvaluatorEvidence`) and the harness
    (:class:`HarnessEvidence`) measured of the run; either is None when nobody
    gave it, and the checks that need it then fail.
    """

    files: dict[str, Path] = Field(
        default_factory=dict,
        description="Submission file name (e.g. 'meta.json') -> local path of the evaluator's "
        "frozen copy.",
    )
    tensor_shapes: dict[str, list[Annotated[int, Field(ge=0)]]] | None = Field(
        default=None,
        description="State-dict key -> shape of the submitted policy, as the evaluator loaded "
        "it; None when no policy was loaded (an architecture check then fails).",
    )
    evaluator: EvaluatorEvidence | None = Field(
        default=None, description="The evaluator's observations of the run's training."
    )
    harness: HarnessEvidence | None = Field(
        default=None, description="The harness's measurements of the agent."
    )

    @classmethod
    def from_directory(
        cls,
        directory: Path,
        tensor_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        evaluator: EvaluatorEvidence | None = None,
        harness: HarnessEvidence | None = None,
    ) -> GateEvidence:
        """Evidence made of every regular file directly inside ``directory`` (a snapshot)."""
        files = {p.name: p for p in sorted(directory.iterdir()) if p.is_file()}
        shapes = None if tensor_shapes is None else {k: list(v) for k, v in tensor_shapes.items()}
        return cls(files=files, tensor_shapes=shapes, evaluator=evaluator, harness=harness)


class CheckResult(_Model):
    """The outcome of one gate check."""

    name: str = Field(description="The check's name in the task config (its kind by default).")
    kind: str = Field(
        description="The check kind, e.g. 'architecture'; 'gate' for the gate itself."
    )
    passed: bool = Field(
        description="True when the check ran to the end and found no fault; for a declared "
        "check that only means the declaration is acceptable (see 'verified')."
    )
    reason: str = Field(description="Why it passed or failed, one line, for the report.")
    evidence: EvidenceKind | None = Field(
        default=None,
        description="What the check rests on: 'evaluator', 'harness', 'tensors' or "
        "'declared'; None for the gate itself (and in reports written before it existed).",
    )
    verified: bool = Field(
        default=False,
        description="True when the check passed on evidence the evaluator or the harness "
        "observed; never for a declared check.",
    )


class GateOutcome(_Model):
    """The outcome of the whole gate."""

    passed: bool = Field(
        description="True when no check failed and at least one passed verified: declared "
        "checks alone never pass the gate."
    )
    checks: list[CheckResult] = Field(description="Every check, in config order.")

    @property
    def first_failure(self) -> CheckResult | None:
        """The first failed check (the one the score line names), or None."""
        return next((c for c in self.checks if not c.passed), None)

    @classmethod
    def failed(cls, name: str, reason: str) -> GateOutcome:
        """A gate that could not run at all, failed with one synthetic check result."""
        return cls(
            passed=False,
            checks=[CheckResult(name=name, kind="gate", passed=False, reason=one_line(reason))],
        )

    @classmethod
    def of(cls, checks: list[CheckResult]) -> GateOutcome:
        """The gate over ``checks``: passed when none failed and one or more is verified."""
        passed = bool(checks) and all(c.passed for c in checks) and any(c.verified for c in checks)
        return cls(passed=passed, checks=checks)

    def evidence_text(self) -> str:
        """Which checks rest on what evidence, in words, for the score explanation.

        E.g. "architecture verified on the policy tensors as the evaluator loaded them;
        algorithm_allowlist on the agent's declaration only (declared, not verified)".
        """
        parts = []
        for c in self.checks:
            if c.evidence is None:
                continue
            words = EVIDENCE_WORDS[c.evidence]
            if c.kind == "budget":
                words = "the evaluator's practice-step count and the harness's clock"
            if c.evidence == "declared":
                state = "failed " if not c.passed else ""
            else:
                state = "verified " if c.verified else "failed "
            parts.append(f"{c.name} {state}on {words}")
        return "; ".join(parts)


def run_gate(
    gate: FaithfulnessGate | None,
    evidence: GateEvidence | None,
    *,
    contract_tensors: Mapping[str, Sequence[int]] | None = None,
) -> GateOutcome:
    """Run every check of ``gate`` over ``evidence``; never raises.

    ``contract_tensors`` is the task contract's key -> shape, used by an
    architecture check that lists no tensors of its own.
    """
    try:
        if gate is None:
            return GateOutcome.failed("gate", "no faithfulness gate is configured for this task")
        if evidence is None:
            return GateOutcome.failed("evidence", "no submission evidence was given to the gate")
        if not gate.checks:
            return GateOutcome.failed("gate", "the faithfulness gate has no checks")
        results = [_run_one(check, gate, evidence, contract_tensors) for check in gate.checks]
        outcome = GateOutcome.of(results)
        if not outcome.passed and all(r.passed for r in results):  # declared checks only
            return GateOutcome(
                passed=False,
                checks=[
                    *results,
                    CheckResult(
                        name="gate",
                        kind="gate",
                        passed=False,
                        reason="no check passed on verified evidence (declared, not verified)",
                    ),
                ],
            )
        return outcome
    except Exception as exc:  # fail closed: nothing escapes the gate
        return GateOutcome.failed("gate", f"internal error: {type(exc).__name__}: {exc}")


def _run_one(
    check: _Check,
    gate: FaithfulnessGate,
    evidence: GateEvidence,
    contract_tensors: Mapping[str, Sequence[int]] | None,
) -> CheckResult:
    name = check_name(check)
    try:
        if isinstance(check, ArchitectureCheck):
            reason = architecture_check(check, evidence, contract_tensors)
        elif isinstance(check, AlgorithmAllowlistCheck):
            reason = algorithm_check(check, evidence)
        elif isinstance(check, BudgetCheck):
            reason = budget_check(check, evidence)
        elif isinstance(check, LearningCurveCheck):
            reason = learning_curve_check(check, gate, evidence)
        else:  # a kind added to the config but not here must not pass silently
            raise EvidenceError(f"unknown check kind {getattr(check, 'kind', '?')!r}")
        passed = True
    except EvidenceError as exc:
        reason, passed = str(exc), False
    except Exception as exc:  # fail closed: a crashing check is a failed check
        reason, passed = f"error in check: {type(exc).__name__}: {exc}", False
    kind = _EVIDENCE_OF.get(check.kind)
    return CheckResult(
        name=name,
        kind=check.kind,
        passed=passed,
        reason=one_line(reason),
        evidence=kind,
        verified=passed and kind is not None and kind != "declared",
    )
