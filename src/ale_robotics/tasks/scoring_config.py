"""Scoring settings a task config may carry (cap, eps, safety penalties, faithfulness gate).

Everything here is declarative data read from a task config's ``scoring`` block;
the code that applies it lives in :mod:`ale_robotics.scoring.score` and
:mod:`ale_robotics.scoring.gate`. It is part of the task model (the task spec
imports it), so the scoring package sits above the task package and this module
imports nothing of ours; :mod:`ale_robotics.scoring.config` re-exports it. Checks
that need the whole task (does a named metric exist?) are in
:func:`ale_robotics.tasks.scorable.check_scorable`, not in these validators.

Every field added after the first release has a default, so configs written
before it stay valid.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AlgorithmAllowlistCheck",
    "ArchitectureCheck",
    "BudgetCheck",
    "Condition",
    "DeclaredFinalValue",
    "ExpectedTensor",
    "FaithfulnessGate",
    "GateCheck",
    "LearningCurveCheck",
    "SafetyPenalty",
    "ScoringConfig",
    "check_name",
]


class _Strict(BaseModel):
    # allow_inf_nan=False: a tolerance or threshold of NaN would make every
    # comparison false and silently disable the rule it belongs to.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SafetyPenalty(_Strict):
    """A zero-target safety metric (collision rate, ...) that scales the score down.

    The factor is always in [0, 1], so a penalty can lower a score but never
    raise it; several penalties multiply.
    """

    metric: str = Field(description="Name of a task metric with role 'safety'.")
    tolerance: float = Field(
        gt=0,
        description="Measured value at which the factor reaches 0 ('linear'), or above "
        "which it is 0 ('step'). Must be positive: it is a divisor.",
    )
    kind: Literal["linear", "step"] = Field(
        default="linear",
        description="'linear': factor = max(0, 1 - measured/tolerance). "
        "'step': factor = 1 while measured <= tolerance, else 0.",
    )


class Condition(_Strict):
    """A threshold a metric must reach for the task to score at all (else the score is 0)."""

    metric: str = Field(description="Name of a task metric, e.g. 'success_rate'.")
    threshold: float
    direction: Literal["at_least", "at_most"] = Field(
        default="at_least",
        description="'at_least': met when measured >= threshold; "
        "'at_most': met when measured <= threshold. Both inclusive.",
    )


class ExpectedTensor(_Strict):
    """One state-dict key and its shape, as the paper's network has it."""

    key: str = Field(min_length=1)
    shape: list[Annotated[int, Field(ge=0)]]


class _CheckBase(_Strict):
    name: str | None = Field(
        default=None,
        min_length=1,
        description="Name shown in the report when the check fails; defaults to its kind. "
        "Names must be unique within a gate.",
    )


class ArchitectureCheck(_CheckBase):
    """The submitted policy's state-dict keys and shapes equal the paper's network exactly."""

    kind: Literal["architecture"] = "architecture"
    tensors: list[ExpectedTensor] | None = Field(
        default=None,
        description="Expected keys and shapes; None means the task contract's 'tensors'.",
    )

    @model_validator(mode="after")
    def _distinct_keys(self) -> ArchitectureCheck:
        if self.tensors is not None:
            keys = [t.key for t in self.tensors]
            if len(set(keys)) != len(keys):
                raise ValueError("architecture check: each tensor key may be listed once")
        return self


class AlgorithmAllowlistCheck(_CheckBase):
    """A field of a JSON evidence file (the declared algorithm) is in an allow-list."""

    kind: Literal["algorithm_allowlist"] = "algorithm_allowlist"
    file: str = "meta.json"
    field: str = "algorithm"
    allowed: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1,
        description="Accepted values, compared after stripping whitespace and case-folding.",
    )


class BudgetCheck(_CheckBase):
    """The declared number of training steps is within the task's compute budget."""

    kind: Literal["budget"] = "budget"
    file: str = "meta.json"
    field: str = "training_steps"
    max_steps: int = Field(gt=0, description="Largest accepted value of the field.")


class DeclaredFinalValue(_Strict):
    """Where the submission declares its final evaluation value, and how close the curve must be."""

    file: str = "meta.json"
    field: str = "final_eval_return"
    abs_tolerance: float = Field(default=0.0, ge=0)
    rel_tolerance: float = Field(
        default=0.0, ge=0, description="Relative to the declared value's magnitude."
    )


class LearningCurveCheck(_CheckBase):
    """A learning-curve CSV is present, well formed and consistent with the budget."""

    kind: Literal["learning_curve"] = "learning_curve"
    file: str = "curve.csv"
    step_column: str = "step"
    value_column: str = "eval_return"
    min_rows: int = Field(default=2, ge=1)
    max_step: int | None = Field(
        default=None,
        gt=0,
        description="Largest accepted last step; None means the gate's budget check's max_steps "
        "(a gate without a budget check must set it).",
    )
    declared_final: DeclaredFinalValue | None = Field(
        default=None,
        description="When set, the curve's last value must match the value declared there "
        "within max(abs_tolerance, rel_tolerance * |declared|).",
    )


GateCheck = Annotated[
    ArchitectureCheck | AlgorithmAllowlistCheck | BudgetCheck | LearningCurveCheck,
    Field(discriminator="kind"),
]


class FaithfulnessGate(_Strict):
    """Declarative checks that a reproduction followed the paper's method.

    All checks run; the gate passes only when every one passes (fail closed).
    """

    checks: list[GateCheck] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> FaithfulnessGate:
        names = [check_name(c) for c in self.checks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(
                f"scoring.gate.checks: names must be unique, {', '.join(dupes)} repeated; "
                "give each check a distinct 'name'"
            )
        budget = self.budget_max_steps()
        for c in self.checks:
            if isinstance(c, LearningCurveCheck) and c.max_step is None and budget is None:
                raise ValueError(
                    f"scoring.gate.checks.{check_name(c)}.max_step: required when the gate "
                    "has no budget check"
                )
        return self

    def budget_max_steps(self) -> int | None:
        """The smallest max_steps of the gate's budget checks (None without one)."""
        limits = [c.max_steps for c in self.checks if isinstance(c, BudgetCheck)]
        return min(limits) if limits else None


def check_name(
    check: ArchitectureCheck | AlgorithmAllowlistCheck | BudgetCheck | LearningCurveCheck,
) -> str:
    """The name a check is reported under: its own name, or its kind."""
    return check.name if check.name is not None else check.kind


class ScoringConfig(BaseModel):
    """How a task turns measured metrics into a score (see ARCHITECTURE.md §5)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cap: float = Field(default=1.5, gt=0, description="Upper clamp of the normalized score.")
    eps: float = Field(
        default=1e-6, gt=0, description="Floor of the measured value for lower-is-better ratios."
    )
    safety: list[SafetyPenalty] = Field(
        default_factory=list,
        description="One penalty per safety metric; factors multiply.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Thresholds that must all be met, else the score is 0.",
    )
    gate: FaithfulnessGate | None = Field(
        default=None,
        description="Faithfulness checks; required for reproduction-genre tasks.",
    )
