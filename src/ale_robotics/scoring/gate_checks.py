"""The faithfulness gate's checks, one function each, and the readers of the evidence they
rest on (size-capped, strict JSON, no duplicate keys).

Split from :mod:`.gate`, which runs them (never raising) and holds the evidence and
outcome models: each check here returns the reason it passed or raises
:class:`EvidenceError` with the reason it failed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ale_robotics.scoring.curve_noise import CurveNoiseError, MeasuredPoint, improvement
from ale_robotics.tasks.scoring_config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    FaithfulnessGate,
    LearningCurveCheck,
)

if TYPE_CHECKING:
    from ale_robotics.scoring.gate import CurveEvidence, EvaluatorEvidence, GateEvidence

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "EvidenceError",
    "algorithm_check",
    "architecture_check",
    "budget_check",
    "learning_curve_check",
    "one_line",
]

MAX_EVIDENCE_BYTES = 16 * 1024 * 1024
"""Largest evidence file the gate reads; bigger ones fail (a meta file is small)."""

_MAX_REASON = 400
_MAX_LISTED = 5


class EvidenceError(Exception):
    """The evidence does not satisfy a check; the message is the reason."""


# -- evidence readers ------------------------------------------------------------------------


def _read_bytes(evidence: GateEvidence, name: str) -> bytes:
    path = evidence.files.get(name)
    if path is None:
        raise EvidenceError(f"{name} is not in the submission")
    try:
        if not path.is_file():
            raise EvidenceError(f"{name} is not a readable regular file")
        with path.open("rb") as fh:
            data = fh.read(MAX_EVIDENCE_BYTES + 1)
    except OSError as exc:
        raise EvidenceError(f"{name} cannot be read: {exc.strerror or exc}") from exc
    if len(data) > MAX_EVIDENCE_BYTES:
        raise EvidenceError(f"{name} is larger than {MAX_EVIDENCE_BYTES} bytes")
    return data


def _read_text(evidence: GateEvidence, name: str) -> str:
    try:
        return _read_bytes(evidence, name).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvidenceError(f"{name} is not UTF-8 text: {exc.reason}") from exc


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # two different values for one field: contradictory evidence
            raise EvidenceError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(token: str) -> Any:
    raise EvidenceError(f"non-finite number {token}")


def _read_json_object(evidence: GateEvidence, name: str) -> dict[str, Any]:
    text = _read_text(evidence, name)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except EvidenceError as exc:
        raise EvidenceError(f"{name} is not valid: {exc}") from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise EvidenceError(f"{name} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise EvidenceError(f"{name} must hold a JSON object, not {type(data).__name__}")
    return data


def _field(evidence: GateEvidence, name: str, field: str) -> Any:
    data = _read_json_object(evidence, name)
    if field not in data:
        raise EvidenceError(f"{name} has no {field!r} field")
    return data[field]


def _int_field(evidence: GateEvidence, name: str, field: str) -> int:
    value = _field(evidence, name, field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EvidenceError(f"{name} {field} must be an integer, got {value!r}")
    if value < 0:
        raise EvidenceError(f"{name} {field} must not be negative, got {value}")
    return value


# -- checks: each returns the pass reason or raises EvidenceError ----------------------------


def architecture_check(
    check: ArchitectureCheck,
    evidence: GateEvidence,
    contract_tensors: Mapping[str, Sequence[int]] | None,
) -> str:
    if check.tensors is not None:
        expected = {t.key: list(t.shape) for t in check.tensors}
        if len(expected) != len(check.tensors):
            raise EvidenceError("the check lists a tensor key twice")
    elif contract_tensors:
        expected = {k: list(v) for k, v in contract_tensors.items()}
    else:
        raise EvidenceError("no expected tensors: the check lists none and the contract has none")
    if evidence.tensor_shapes is None:
        raise EvidenceError("no policy tensor shapes in the evidence")
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
        raise EvidenceError("; ".join(problems))
    return f"{len(expected)} tensors match the paper's network"


def algorithm_check(check: AlgorithmAllowlistCheck, evidence: GateEvidence) -> str:
    value = _field(evidence, check.file, check.field)
    if not isinstance(value, str):
        raise EvidenceError(f"{check.file} {check.field} must be a string, got {value!r}")
    allowed = {a.strip().casefold() for a in check.allowed}
    if value.strip().casefold() not in allowed:
        raise EvidenceError(
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
        raise EvidenceError("no evaluator evidence: the result says nothing of the training")
    if ev.practice_steps is None:
        raise EvidenceError("the evaluator observed no training (simulator on the agent's side)")
    return ev.practice_steps


def _step_limit(max_steps: int, ev: EvaluatorEvidence) -> int:
    """The check's limit, or the evaluator's enforced budget where that is smaller."""
    if ev.practice_steps_budget is not None:
        return min(max_steps, ev.practice_steps_budget)
    return max_steps


def budget_check(check: BudgetCheck, evidence: GateEvidence) -> str:
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
        raise EvidenceError("; ".join(problems))
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
    except EvidenceError:
        return None


def learning_curve_check(
    check: LearningCurveCheck, gate: FaithfulnessGate, evidence: GateEvidence
) -> str:
    ev = evidence.evaluator
    if ev is None:
        raise EvidenceError(
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
            raise EvidenceError(
                f"checkpoint {i} was evaluated at {steps[i]:,} practice steps, before "
                f"checkpoint {i - 1} at {steps[i - 1]:,}: the evaluator's count cannot decrease"
            )
    # Points are counted at distinct step counts: committing the same training twice adds
    # no point, and (doing less never pays) neither does it remove one.
    distinct = len(set(steps))
    if distinct < check.min_points:
        at = "" if distinct == len(curve) else f" at {distinct} distinct practice-step counts"
        raise EvidenceError(
            f"{observed}; {len(curve)} checkpoints evaluated{at} "
            f"(at least {check.min_points} needed)"
        )
    max_step = check.max_step if check.max_step is not None else gate.budget_max_steps()
    if max_step is None:
        raise EvidenceError("no step limit: set max_step or add a budget check")
    limit = _step_limit(max_step, ev)
    if steps[-1] > limit:
        raise EvidenceError(
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
        raise EvidenceError(
            f"a gap of {gaps[widest]:,} practice steps {where} is more than "
            f"{check.max_gap_fraction:g} of the last checkpoint's {steps[-1]:,}: the checkpoints "
            "are not spread over the training"
        )
    last = curve[-1]
    if ev.submitted_policy_sha256 is None:
        raise EvidenceError(
            "the submitted policy's SHA-256 is unknown, so the last checkpoint cannot be "
            "matched to it"
        )
    if last.policy_sha256 != ev.submitted_policy_sha256:
        raise EvidenceError(
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
        raise EvidenceError("; ".join(problems))
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


def one_line(text: str) -> str:
    """Reasons go into a single score line: no newlines, bounded length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_REASON else flat[: _MAX_REASON - 3] + "..."
