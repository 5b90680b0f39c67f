"""The faithfulness gate: did a reproduction follow the paper's method?

A reproduction-genre task scores only when its submission shows the paper's
method (ARCHITECTURE.md §5). The checks are declared in the task config
(:class:`~ale_robotics.scoring.config.FaithfulnessGate`) and run here over
:class:`GateEvidence`: the evaluator's frozen snapshot of the submission (never
the agent's live volume) plus the policy's tensor shapes as the evaluator loaded
them.

The gate fails closed. Missing, unreadable, malformed or contradictory evidence
fails the check that needed it, with the check named and the reason; an
exception raised inside a check fails that check too. :func:`run_gate` never
raises (short of ``KeyboardInterrupt``/``SystemExit``, which are not errors of
the gate): the evidence is written by an untrusted agent, so every way of
breaking a parser must end in "failed", never in "skipped" or a crash that a
caller might mishandle.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.scoring.config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    FaithfulnessGate,
    LearningCurveCheck,
    check_name,
)

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "CheckResult",
    "GateEvidence",
    "GateOutcome",
    "run_gate",
]

MAX_EVIDENCE_BYTES = 16 * 1024 * 1024
"""Largest evidence file the gate reads; bigger ones fail (a curve or meta file is small)."""

_MAX_REASON = 400
_MAX_LISTED = 5
_UINT_RE = re.compile(r"[0-9]+")

_Check = ArchitectureCheck | AlgorithmAllowlistCheck | BudgetCheck | LearningCurveCheck


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GateEvidence(_Model):
    """What the gate may look at: the evaluator's snapshot of the submission."""

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

    @classmethod
    def from_directory(
        cls, directory: Path, tensor_shapes: Mapping[str, Sequence[int]] | None = None
    ) -> GateEvidence:
        """Evidence made of every regular file directly inside ``directory`` (a snapshot)."""
        files = {p.name: p for p in sorted(directory.iterdir()) if p.is_file()}
        shapes = None if tensor_shapes is None else {k: list(v) for k, v in tensor_shapes.items()}
        return cls(files=files, tensor_shapes=shapes)


class CheckResult(_Model):
    """The outcome of one gate check."""

    name: str = Field(description="The check's name in the task config (its kind by default).")
    kind: str = Field(
        description="The check kind, e.g. 'architecture'; 'gate' for the gate itself."
    )
    passed: bool = Field(description="True only when the check ran to the end and found no fault.")
    reason: str = Field(description="Why it passed or failed, one line, for the report.")


class GateOutcome(_Model):
    """The outcome of the whole gate: passed only when every check passed."""

    passed: bool = Field(description="True when there was at least one check and all passed.")
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
        return GateOutcome(passed=all(r.passed for r in results), checks=results)
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
    return CheckResult(name=name, kind=check.kind, passed=passed, reason=_one_line(reason))


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


def _number_field(evidence: GateEvidence, name: str, field: str) -> float:
    value = _field(evidence, name, field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _EvidenceError(f"{name} {field} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise _EvidenceError(f"{name} {field} must be finite, got {value!r}")
    return number


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
    return f"{check.field} {value!r} is allowed"


def _budget(check: BudgetCheck, evidence: GateEvidence) -> str:
    steps = _int_field(evidence, check.file, check.field)
    if steps > check.max_steps:
        raise _EvidenceError(
            f"{check.file} {check.field} {steps} exceeds the budget of {check.max_steps}"
        )
    return f"{check.field} {steps} within the budget of {check.max_steps}"


def _learning_curve(
    check: LearningCurveCheck, gate: FaithfulnessGate, evidence: GateEvidence
) -> str:
    name = check.file
    text = _read_text(evidence, name)
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise _EvidenceError(f"{name} is not valid CSV: {exc}") from exc
    rows = [r for r in rows if any(cell.strip() for cell in r)]  # blank lines carry nothing
    if not rows:
        raise _EvidenceError(f"{name} is empty")
    header = [cell.strip() for cell in rows[0]]
    for column in (check.step_column, check.value_column):
        count = header.count(column)
        if count != 1:
            what = "no" if count == 0 else f"{count}"
            raise _EvidenceError(f"{name} header has {what} {column!r} column(s): {header}")
    step_at, value_at = header.index(check.step_column), header.index(check.value_column)

    steps: list[int] = []
    values: list[float] = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise _EvidenceError(
                f"{name} row {line} has {len(row)} cells, the header {len(header)}"
            )
        step_cell, value_cell = row[step_at].strip(), row[value_at].strip()
        if not _UINT_RE.fullmatch(step_cell):
            raise _EvidenceError(f"{name} row {line}: step {step_cell!r} is not a whole number")
        step = int(step_cell)
        try:
            value = float(value_cell)
        except ValueError as exc:
            raise _EvidenceError(f"{name} row {line}: {value_cell!r} is not a number") from exc
        if not math.isfinite(value):
            raise _EvidenceError(f"{name} row {line}: {check.value_column} is {value_cell}")
        if steps and step <= steps[-1]:
            raise _EvidenceError(
                f"{name} row {line}: step {step} does not increase (previous {steps[-1]})"
            )
        steps.append(step)
        values.append(value)

    if len(steps) < check.min_rows:
        raise _EvidenceError(f"{name} has {len(steps)} data rows, at least {check.min_rows} needed")
    max_step = check.max_step if check.max_step is not None else gate.budget_max_steps()
    if max_step is None:
        raise _EvidenceError("no step limit: set max_step or add a budget check")
    if steps[-1] > max_step:
        raise _EvidenceError(f"{name} last step {steps[-1]} exceeds the budget of {max_step}")
    _curve_within_declared_steps(gate, evidence, steps[-1], name)

    detail = ""
    if check.declared_final is not None:
        decl = check.declared_final
        declared = _number_field(evidence, decl.file, decl.field)
        allowed = max(decl.abs_tolerance, decl.rel_tolerance * abs(declared))
        if not abs(values[-1] - declared) <= allowed:
            raise _EvidenceError(
                f"{name} final {check.value_column} {values[-1]:g} contradicts {decl.file} "
                f"{decl.field} {declared:g} (tolerance {allowed:g})"
            )
        detail = f", matches declared {decl.field} {declared:g}"
    return (
        f"{len(steps)} rows, steps {steps[0]}..{steps[-1]}, "
        f"final {check.value_column} {values[-1]:g}{detail}"
    )


def _curve_within_declared_steps(
    gate: FaithfulnessGate, evidence: GateEvidence, last_step: int, name: str
) -> None:
    """A curve evaluated past the training steps the submission declares contradicts it.

    Only when the declared value is readable: an unreadable one already fails the
    budget check, which names the real problem.
    """
    for budget in (c for c in gate.checks if isinstance(c, BudgetCheck)):
        try:
            declared = _int_field(evidence, budget.file, budget.field)
        except _EvidenceError:
            continue
        if last_step > declared:
            raise _EvidenceError(
                f"{name} last step {last_step} is past the declared {budget.field} {declared}"
            )


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown if len(items) <= _MAX_LISTED else f"{shown} and {len(items) - _MAX_LISTED} more"


def _one_line(text: str) -> str:
    """Reasons go into a single score line: no newlines, bounded length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_REASON else flat[: _MAX_REASON - 3] + "..."
