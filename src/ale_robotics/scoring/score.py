"""Turn evaluator-measured metrics into a score against the paper (docs/architecture.md#scoring).

The rules, in the order they apply:

1. :func:`check_scorable` refuses a config or target for which a ratio is
   meaningless (a :class:`~ale_robotics.errors.ConfigError`, raised, never scored).
2. Ratio: ``measured / paper`` when higher is better, ``paper / max(measured,
   eps)`` when lower is better; the base score is the ratio clamped to
   ``[0, cap]``.
3. Safety penalties multiply the base score by factors in [0, 1].
4. Any of these makes the score 0, with the reason in the report (first
   matching one gives the status): the faithfulness gate failed (reproduction
   genre, or any task that configures a gate); a metric the score needs (the
   primary, a safety or a condition metric) is missing, non-finite, or negative
   though the task declares it cannot be; a condition is unmet.
5. A task without a synced target is ``unscored``: its score is None and the
   report says "unscored: target not synced"; no value is invented.

Missing or non-finite measurements are a zero with a reason rather than an
exception: the harness must always be able to write ``result.json``, and a
zero that names its cause is as loud as a crash while still being a verdict.
A NaN therefore can never produce a non-zero score. A negative value of a
metric declared non-negative is treated the same way, because in a
lower-is-better ratio it would otherwise floor to ``eps`` and earn the cap.

:func:`check_scorable` lives with the task model
(:mod:`ale_robotics.tasks.scorable`, which the registry calls) and is re-exported here.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

from ale_robotics.scoring.gate import GateEvidence, GateOutcome, run_gate
from ale_robotics.scoring.report import (
    ConditionResult,
    PenaltyResult,
    ScoreReport,
    ScoreStatus,
    fmt_number,
)
from ale_robotics.tasks.manifest import PaperTarget
from ale_robotics.tasks.scorable import check_scorable
from ale_robotics.tasks.scoring_config import Condition, SafetyPenalty
from ale_robotics.tasks.spec import Direction, TaskSpec

__all__ = ["UNSCORED_PHRASE", "check_scorable", "penalty_factor", "score"]

UNSCORED_PHRASE = "unscored: target not synced"
"""The exact phrase a report without a synced target carries (the harness and tests match it)."""


def penalty_factor(penalty: SafetyPenalty, measured: float) -> float:
    """The factor in [0, 1] a safety penalty applies for a valid (finite, >= 0) measurement."""
    if penalty.kind == "step":
        factor = 1.0 if measured <= penalty.tolerance else 0.0
    else:
        factor = 1.0 - measured / penalty.tolerance
    return min(1.0, max(0.0, factor))


def score(
    task: TaskSpec,
    measured: Mapping[str, float],
    target: PaperTarget | None,
    evidence: GateEvidence | None = None,
    *,
    no_result: str | None = None,
) -> ScoreReport:
    """Score ``measured`` (the evaluator's metrics) for ``task`` against ``target``.

    ``no_result`` says why the evaluator measured nothing for this run (no
    submission, a rejected one): the score is then 0 with that reason first,
    status ``no_result``, so a missing result is never mistaken for a bad one.

    Raises :class:`ConfigError` only for a config or target that
    :func:`check_scorable` refuses; everything about the measurement and the
    evidence ends up in the report instead.
    """
    check_scorable(task, target)
    cfg = task.scoring
    primary = task.primary_metric
    got = _Measured(task, measured, no_result)
    m = got.usable(primary.name)
    penalties = [_penalty(p, got) for p in cfg.safety]
    conditions = [_condition(c, got) for c in cfg.conditions]
    gate: GateOutcome | None = None
    if task.genre == "reproduction" or cfg.gate is not None:
        contract = (
            {t.key: t.shape for t in task.contract.tensors} if task.contract is not None else None
        )
        gate = run_gate(cfg.gate, evidence, contract_tensors=contract)
    ratio: float | None = None
    base: float | None = None
    if target is not None and m is not None:
        if primary.direction is Direction.HIGHER_IS_BETTER:
            ratio = m / target.value
        else:
            ratio = target.value / max(m, cfg.eps)
        base = min(cfg.cap, max(0.0, ratio))
    problems = list(dict.fromkeys(got.problems))  # a metric used twice is reported once
    status, final = _verdict(target, no_result, gate, problems, base, conditions, penalties)
    values = got.values
    report = ScoreReport(
        task_id=task.id,
        status=status,
        primary_metric=primary.name,
        direction=primary.direction,
        measured=values,
        primary_measured=values.get(primary.name),
        target_value=None if target is None else target.value,
        target_source=None if target is None else target.source,
        target_confidence=None if target is None else target.confidence,
        target_statistic=None if target is None else target.statistic,
        target_derivation=None if target is None else target.derivation,
        comparability=None if target is None else target.comparability,
        ratio=ratio,
        cap=cfg.cap,
        eps=cfg.eps,
        base_score=base,
        penalties=penalties,
        conditions=conditions,
        gate=gate,
        problems=problems,
        score=final,
        explanation="",
    )
    return report.model_copy(update={"explanation": _explain(report)})


class _Measured:
    """The evaluator's values as floats, and the problems met using them for the score."""

    def __init__(
        self, task: TaskSpec, measured: Mapping[str, float], no_result: str | None
    ) -> None:
        self.values = {name: _as_float(v) for name, v in measured.items()}
        self.problems: list[str] = [] if no_result is None else [no_result]
        self._metrics = {m.name: m for m in task.metrics}

    def usable(self, name: str) -> float | None:
        """The value when the score may use it; else None, with the problem recorded."""
        v = self.values.get(name)
        if v is None:
            self.problems.append(f"{name} was not measured")
            return None
        if not math.isfinite(v):
            self.problems.append(f"{name} is {v}")
            return None
        spec = self._metrics.get(name)
        # Below zero, a higher-is-better ratio is just clamped to 0 (a backward-running
        # cheetah scores like a motionless one); a lower-is-better ratio would be rewarded
        # through max(measured, eps), so there it is an unusable measurement.
        lower = spec is None or spec.direction is Direction.LOWER_IS_BETTER
        if v < 0 and lower and (spec is None or not spec.can_be_negative):
            self.problems.append(f"{name} is {v:g}, but the task declares it cannot be negative")
            return None
        return v


def _penalty(p: SafetyPenalty, got: _Measured) -> PenaltyResult:
    v = got.usable(p.metric)
    return PenaltyResult(
        metric=p.metric,
        kind=p.kind,
        measured=got.values.get(p.metric),
        tolerance=p.tolerance,
        factor=0.0 if v is None else penalty_factor(p, v),
    )


def _condition(c: Condition, got: _Measured) -> ConditionResult:
    v = got.usable(c.metric)
    met = v is not None and (v >= c.threshold if c.direction == "at_least" else v <= c.threshold)
    return ConditionResult(
        metric=c.metric,
        direction=c.direction,
        threshold=c.threshold,
        measured=got.values.get(c.metric),
        met=met,
    )


def _verdict(
    target: PaperTarget | None,
    no_result: str | None,
    gate: GateOutcome | None,
    problems: list[str],
    base: float | None,
    conditions: list[ConditionResult],
    penalties: list[PenaltyResult],
) -> tuple[ScoreStatus, float | None]:
    """The status and the score, the first reason for a 0 in the documented order."""
    if target is None:
        return "unscored", None
    if no_result is not None:
        return "no_result", 0.0
    if gate is not None and not gate.passed:
        return "gate_failed", 0.0
    if problems or base is None:
        return "invalid_measurement", 0.0
    if not all(c.met for c in conditions):
        return "condition_failed", 0.0
    return "scored", base * math.prod(p.factor for p in penalties)


def _as_float(value: object) -> float:
    """A measured value as a float; anything but a real number (a str, a bool) becomes NaN.

    ``numbers.Real`` admits int, float and numpy scalars. A string is refused
    rather than parsed: the evaluator produces numbers, so a string means a bug.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _explain(r: ScoreReport) -> str:
    """The report's one-paragraph explanation, built only from its own fields.

    A score of 0 for a reason (no result, a failed gate, an unusable measurement, an
    unmet condition) opens with that reason, the measurement and its paper source after
    it: a reader of a rejected run sees why before the citation.
    """
    m = r.primary_metric
    shown = "missing" if r.primary_measured is None else fmt_number(r.primary_measured)
    parts: list[str] = []
    cause: list[str] = []
    """The sentences that say why a zero is a zero, put first."""
    if r.target_value is None or r.target_source is None:
        parts.append(f"Measured {m} {shown}; {UNSCORED_PHRASE}, so no score is given.")
    else:
        src = f"{r.target_source.paper}, {r.target_source.location}"
        if r.target_source.page:
            src += f", page {r.target_source.page}"
        if r.target_confidence == "approximate":
            src += "; approximate"
        if r.target_statistic is not None:
            src = f"{r.target_statistic.clause}; {src}"
        head = f"Measured {m} {shown} vs paper {fmt_number(r.target_value)} ({src})"
        if r.direction is Direction.LOWER_IS_BETTER:
            head += ", lower is better"
        if r.ratio is None:
            parts.append(f"{head}: no ratio, the measurement is unusable.")
        else:
            how = "paper/measured" if r.direction is Direction.LOWER_IS_BETTER else "measured/paper"
            ratio = f"ratio {r.ratio:.3f} ({how})"
            if r.ratio > r.cap:
                parts.append(f"{head}: {ratio}, clamped to cap {fmt_number(r.cap)}.")
            elif r.ratio < 0:
                parts.append(f"{head}: {ratio}, clamped to 0.")
            else:
                parts.append(f"{head}: {ratio}, within cap {fmt_number(r.cap)}.")

    if not r.penalties:
        parts.append("No safety penalties.")
    else:
        items = [
            f"{p.metric} {'missing' if p.measured is None else fmt_number(p.measured)} "
            f"(tolerance {fmt_number(p.tolerance)}, {p.kind}) x{p.factor:.3f}"
            for p in r.penalties
        ]
        parts.append(f"Safety penalties: {'; '.join(items)}.")
    for c in r.conditions:
        op = ">=" if c.direction == "at_least" else "<="
        got = "missing" if c.measured is None else fmt_number(c.measured)
        verdict = "met" if c.met else "not met"
        sentence = f"Condition {c.metric} {op} {fmt_number(c.threshold)} {verdict} ({got})."
        (cause if r.status == "condition_failed" and not c.met else parts).append(sentence)
    if r.gate is not None:
        if r.gate.passed:
            parts.append(f"Faithfulness gate passed ({len(r.gate.checks)} checks).")
        else:
            failed = "; ".join(f"{c.name}: {c.reason}" for c in r.gate.checks if not c.passed)
            sentence = f"Faithfulness gate failed: {failed}."
            (cause if r.status == "gate_failed" else parts).append(sentence)
        evidence = r.gate.evidence_text()
        if evidence:  # which checks rest on what: a declared one is never evidence of itself
            parts.append(f"Gate evidence: {evidence}.")
    if r.status == "no_result" and r.problems:
        cause.append(f"No result: {r.problems[0]}.")
    elif r.problems:
        sentence = f"Unusable measurements: {'; '.join(r.problems)}."
        (cause if r.status == "invalid_measurement" else parts).append(sentence)

    if r.score is None:
        parts.append("No score.")
    elif r.status == "scored":
        parts.append(f"Score {r.score:.3f}.")
    else:
        reason = {
            "gate_failed": "the faithfulness gate failed",
            "invalid_measurement": "a measurement the score needs is unusable",
            "no_result": "the evaluator has no result for this run",
            "condition_failed": "a condition is not met",
        }.get(r.status, r.status)
        cause.append(f"Score {r.score:.3f} because {reason}.")
    return " ".join([*cause, *parts])
