"""The faithfulness gate: did a reproduction follow the paper's method?

A reproduction-genre task scores only when its submission shows the paper's
method (docs/architecture.md#scoring). The checks are declared in the task config
(:class:`~ale_robotics.scoring.config.FaithfulnessGate`) and run here over
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

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.scoring.config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    FaithfulnessGate,
    LearningCurveCheck,
    check_name,
)
from ale_robotics.scoring.curve_noise import CurveNoiseError, MeasuredPoint, improvement

__all__ = [
    "EVIDENCE_WORDS",
    "MAX_EVIDENCE_BYTES",
    "CheckResult",
    "CurveEvidence",
    "EvaluatorEvidence",
    "EvidenceKind",
    "GateEvidence",
    "GateOutcome",
    "HarnessEvidence",
    "run_gate",
]

MAX_EVIDENCE_BYTES = 16 * 1024 * 1024
"""Largest evidence file the gate reads; bigger ones fail (a meta file is small)."""

_MAX_REASON = 400
_MAX_LISTED = 5

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
            checks=[CheckResult(name=name, kind="gate", passed=False, reason=_one_line(reason))],
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


class _EvidenceError(Exception):
    """The evidence does not satisfy a check; the message is the reason."""


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
            reason = _architecture(check, evidence, contract_tensors)
        elif isinstance(check, AlgorithmAllowlistCheck):
            reason = _algorithm(check, evidence)
        elif isinstance(check, BudgetCheck):
            reason = _budget(check, evidence)
        elif isinstance(check, LearningCurveCheck):
            reason = _learning_curve(check, gate, evidence)
        else:  # a kind added to the config but not here must not pass silently
            raise _EvidenceError(f"unknown check kind {getattr(check, 'kind', '?')!r}")
        passed = True
    except _EvidenceError as exc:
        reason, passed = str(exc), False
    except Exception as exc:  # fail closed: a crashing check is a failed check
        reason, passed = f"error in check: {type(exc).__name__}: {exc}", False
    kind = _EVIDENCE_OF.get(check.kind)
    return CheckResult(
        name=name,
        kind=check.kind,
        passed=passed,
        reason=_one_line(reason),
        evidence=kind,
        verified=passed and kind is not None and kind != "declared",
    )


# -- evidence readers ------------------------------------------------------------------------


def _read_bytes(evidence: GateEvidence, name: str) -> bytes:
    path = evidence.files.get(name)
    if path is None:
        raise _EvidenceError(f"{name} is not in the submission")
    try:
        if not path.is_file():
            raise _EvidenceError(f"{name} is not a readable regular file")
        with path.open("rb") as fh:
            data = fh.read(MAX_EVIDENCE_BYTES + 1)
    except OSError as exc:
        raise _EvidenceError(f"{name} cannot be read: {exc.strerror or exc}") from exc
    if len(data) > MAX_EVIDENCE_BYTES:
        raise _EvidenceError(f"{name} is larger than {MAX_EVIDENCE_BYTES} bytes")
    return data


def _read_text(evidence: GateEvidence, name: str) -> str:
    try:
        return _read_bytes(evidence, name).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _EvidenceError(f"{name} is not UTF-8 text: {exc.reason}") from exc


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # two different values for one field: contradictory evidence
            raise _EvidenceError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(token: str) -> Any:
    raise _EvidenceError(f"non-finite number {token}")


def _read_json_object(evidence: GateEvidence, name: str) -> dict[str, Any]:
    text = _read_text(evidence, name)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _EvidenceError as exc:
        raise _EvidenceError(f"{name} is not valid: {exc}") from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _EvidenceError(f"{name} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _EvidenceError(f"{name} must hold a JSON object, not {type(data).__name__}")
    return data


def _field(evidence: GateEvidence, name: str, field: str) -> Any:
    data = _read_json_object(evidence, name)
    if field not in data:
        raise _EvidenceError(f"{name} has no {field!r} field")
    return data[field]


def _int_field(evidence: GateEvidence, name: str, field: str) -> int:
    value = _field(evidence, name, field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _EvidenceError(f"{name} {field} must be an integer, got {value!r}")
    if value < 0:
        raise _EvidenceError(f"{name} {field} must not be negative, got {value}")
    return value


# -- checks: each returns the pass reason or raises _EvidenceError ----------------------------


def _architecture(
    check: ArchitectureCheck,
    evidence: GateEvidence,
    contract_tensors: Mapping[str, Sequence[int]] | None,
) -> str:
    if check.tensors is not None:
        expected = {t.key: list(t.shape) for t in check.tensors}
        if len(expected) != len(check.tensors):
            raise _EvidenceError("the check lists a tensor key twice")
    elif contract_tensors:
        expected = {k: list(v) for k, v in contract_tensors.items()}
    else:
        raise _EvidenceError("no expected tensors: the check lists none and the contract has none")
    if evidence.tensor_shapes is None:
        raise _EvidenceError("no policy tensor shapes in the evidence")
    actual = evidence.tensor_shapes
    problems: list[str] = []
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    if missing:
        problems.append(f"missing {_listed(missing)}")
    if extra:
        problems.append(f"unexpected {_listed(extra)}")
    wrong = [
        f"{key} has shape {list(actual[key])}, expected {shape}"
        for key, shape in sorted(expected.items())
        if key in actual and list(actual[key]) != shape
    ]
    problems.extend(wrong[:_MAX_LISTED])
    if len(wrong) > _MAX_LISTED:
        problems.append(f"and {len(wrong) - _MAX_LISTED} more wrong shapes")
    if problems:
        raise _EvidenceError("; ".join(problems))
    return f"{len(expected)} tensors match the paper's network"


def _algorithm(check: AlgorithmAllowlistCheck, evidence: GateEvidence) -> str:
    value = _field(evidence, check.file, check.field)
    if not isinstance(value, str):
        raise _EvidenceError(f"{check.file} {check.field} must be a string, got {value!r}")
    allowed = {a.strip().casefold() for a in check.allowed}
    if value.strip().casefold() not in allowed:
        raise _EvidenceError(
            f"{check.file} {check.field} {value!r} is not in the allow-list "
            f"[{', '.join(check.allowed)}]"
        )
    return (
        f"declared, not verified: {check.file} {check.field} {value!r} is in the allow-list "
        f"(nothing the evaluator or the harness observes shows the algorithm)"
    )


def _observed_steps(ev: EvaluatorEvidence | None) -> int:
    """The evaluator's practice-step count, or the reason there is none."""
    if ev is None:
        raise _EvidenceError("no evaluator evidence: the result says nothing of the training")
    if ev.practice_steps is None:
        raise _EvidenceError("the evaluator observed no training (simulator on the agent's side)")
    return ev.practice_steps


def _step_limit(max_steps: int, ev: EvaluatorEvidence) -> int:
    """The check's limit, or the evaluator's enforced budget where that is smaller."""
    if ev.practice_steps_budget is not None:
        return min(max_steps, ev.practice_steps_budget)
    return max_steps


def _budget(check: BudgetCheck, evidence: GateEvidence) -> str:
    problems: list[str] = []
    ev = evidence.evaluator
    steps = _observed_steps(ev)
    assert ev is not None
    limit = _step_limit(check.max_steps, ev)
    if steps > limit:
        problems.append(f"{steps:,} practice steps observed, over the budget of {limit:,}")
    declared = _declared_steps(check, evidence)
    if declared is not None and declared > steps:
        problems.append(
            f"{check.file} declares {check.field} {declared:,}, but the evaluator observed "
            f"{steps:,} practice steps"
        )

    h = evidence.harness
    if h is None:
        problems.append("no harness measurement of the agent's wall clock")
        timing = ""
    else:
        if not (math.isfinite(h.wall_s) and h.wall_s <= h.wall_budget_s):
            problems.append(
                f"the agent ran {h.wall_s:.1f} s by the harness's clock, over the wall-clock "
                f"budget of {h.wall_budget_s:g} s"
            )
        if h.agent_cpu_s is None:
            cpu = "agent CPU time not measured"
        elif h.cpu_budget_s is None:
            cpu = f"agent CPU {h.agent_cpu_s:.1f} s (no CPU budget)"
        elif not (math.isfinite(h.agent_cpu_s) and h.agent_cpu_s <= h.cpu_budget_s):
            problems.append(
                f"the agent used {h.agent_cpu_s:.1f} CPU seconds, over the budget of "
                f"{h.cpu_budget_s:g}"
            )
            cpu = ""
        else:
            cpu = f"agent CPU {h.agent_cpu_s:.1f} s of {h.cpu_budget_s:g} s"
        timing = f"; harness: agent wall clock {h.wall_s:.1f} s of {h.wall_budget_s:g} s, {cpu}"
    if problems:
        raise _EvidenceError("; ".join(problems))
    said = "" if declared is None else f" ({check.file} declares {declared:,})"
    return f"{steps:,} practice steps observed by the evaluator, budget {limit:,}{said}{timing}"


def _declared_steps(check: BudgetCheck, evidence: GateEvidence) -> int | None:
    """The training steps the agent declares, when it declares a readable number; else None.

    Never a reason to pass: it is only compared with the evaluator's count, and an
    absent or unreadable declaration is no contradiction.
    """
    if check.file is None or check.file not in evidence.files:
        return None
    try:
        return _int_field(evidence, check.file, check.field)
    except _EvidenceError:
        return None


def _learning_curve(
    check: LearningCurveCheck, gate: FaithfulnessGate, evidence: GateEvidence
) -> str:
    ev = evidence.evaluator
    if ev is None:
        raise _EvidenceError(
            f"no evaluator evidence: 0 checkpoints evaluated (at least {check.min_points} needed)"
        )
    observed = (
        "the evaluator observed no training (simulator on the agent's side)"
        if ev.practice_steps is None
        else f"{ev.practice_steps:,} practice steps observed"
    )
    curve = ev.curve
    steps = [p.practice_steps for p in curve]
    for i in range(1, len(steps)):
        if steps[i] < steps[i - 1]:  # the evaluator's count never goes back: forged evidence
            raise _EvidenceError(
                f"checkpoint {i} was evaluated at {steps[i]:,} practice steps, before "
                f"checkpoint {i - 1} at {steps[i - 1]:,}: the evaluator's count cannot decrease"
            )
    # Points are counted at distinct step counts: committing the same training twice adds
    # no point, and (doing less never pays) neither does it remove one.
    distinct = len(set(steps))
    if distinct < check.min_points:
        at = "" if distinct == len(curve) else f" at {distinct} distinct practice-step counts"
        raise _EvidenceError(
            f"{observed}; {len(curve)} checkpoints evaluated{at} "
            f"(at least {check.min_points} needed)"
        )
    max_step = check.max_step if check.max_step is not None else gate.budget_max_steps()
    if max_step is None:
        raise _EvidenceError("no step limit: set max_step or add a budget check")
    limit = _step_limit(max_step, ev)
    if steps[-1] > limit:
        raise _EvidenceError(
            f"checkpoint {len(steps) - 1} was evaluated at {steps[-1]:,} practice steps, over "
            f"the budget of {limit:,}"
        )
    allowed = check.max_gap_fraction * steps[-1]
    gaps = [b - a for a, b in zip([0, *steps[:-1]], steps, strict=True)]
    widest = max(range(len(gaps)), key=lambda i: gaps[i])
    if gaps[widest] > allowed:
        where = (
            f"before checkpoint 0 (at {steps[0]:,})"
            if widest == 0
            else f"between checkpoints {widest - 1} and {widest} "
            f"({steps[widest - 1]:,} and {steps[widest]:,})"
        )
        raise _EvidenceError(
            f"a gap of {gaps[widest]:,} practice steps {where} is more than "
            f"{check.max_gap_fraction:g} of the last checkpoint's {steps[-1]:,}: the checkpoints "
            "are not spread over the training"
        )
    last = curve[-1]
    if ev.submitted_policy_sha256 is None:
        raise _EvidenceError(
            "the submitted policy's SHA-256 is unknown, so the last checkpoint cannot be "
            "matched to it"
        )
    if last.policy_sha256 != ev.submitted_policy_sha256:
        raise _EvidenceError(
            f"the last checkpoint ({len(curve) - 1}, at {steps[-1]:,} practice steps, policy "
            f"sha256 {last.policy_sha256[:12]}) is not the submitted policy (sha256 "
            f"{ev.submitted_policy_sha256[:12]})"
        )
    trained = _training_shown(check, curve)
    return (
        f"{len(curve)} checkpoints evaluated by the evaluator at {steps[0]:,}..{steps[-1]:,} "
        f"practice steps (largest gap {gaps[widest]:,}), mean return "
        f"{curve[0].mean_return:.1f} -> {last.mean_return:.1f}; the last is the submitted policy"
        f"{trained}"
    )


def _training_shown(check: LearningCurveCheck, curve: Sequence[CurveEvidence]) -> str:
    """The curve shows training, not only checkpoints: ``min_steps`` counted by the last
    checkpoint and a rise above the first point beyond the episodes' noise. Both faults are
    named together; the pass text says what was shown ('' when neither is configured)."""
    problems: list[str] = []
    shown: list[str] = []
    last = curve[-1].practice_steps
    if check.min_steps is not None:
        if last < check.min_steps:
            problems.append(
                f"the last checkpoint is at {last:,} practice steps, under the minimum of "
                f"{check.min_steps:,} (min_steps): too little training to show"
            )
        else:
            shown.append(f"at least {check.min_steps:,} practice steps")
    if check.min_improvement_se is not None:
        try:
            rise = improvement(
                [_measured(i, p) for i, p in enumerate(curve)], check.min_improvement_se
            )
        except CurveNoiseError as exc:
            problems.append(f"no improvement can be measured: {exc}")
        else:
            said = (
                f"best later checkpoint {rise.best} {rise.gain:+.1f} over the first, margin "
                f"{rise.k:g} x SE {rise.standard_error:.1f} (episode spread "
                f"{rise.spread.std:.1f}, {rise.spread.dof} dof)"
            )
            if rise.passed:
                shown.append(f"rises above the noise: {said}")
            else:
                problems.append(f"no rise above the episodes' noise: {said}")
    if problems:
        raise _EvidenceError("; ".join(problems))
    return "".join(f"; {s}" for s in shown)


def _measured(i: int, point: CurveEvidence) -> MeasuredPoint:
    if point.episodes is None or point.std_return is None:
        raise CurveNoiseError(f"checkpoint {i} has no per-episode spread in the evidence")
    return MeasuredPoint(
        mean_return=point.mean_return, std_return=point.std_return, episodes=point.episodes
    )


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown if len(items) <= _MAX_LISTED else f"{shown} and {len(items) - _MAX_LISTED} more"


def _one_line(text: str) -> str:
    """Reasons go into a single score line: no newlines, bounded length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_REASON else flat[: _MAX_REASON - 3] + "..."
