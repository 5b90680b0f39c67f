"""Scoring settings a task config may carry (cap, eps, safety penalties, faithfulness gate).

Everything here is declarative data read from a task config's ``scoring`` block;
the code that applies it lives in :mod:`ale_robotics.scoring.score` and
:mod:`ale_robotics.scoring.gate`. It is part of the task model (the task spec
imports it), so the scoring package sits above the task package and this module
imports nothing of ours. Checks
that need the whole task (does a named metric exist?) are in
:func:`ale_robotics.tasks.scorable.check_scorable`, not in these validators.

Every field added after the first release has a default, so configs written
before it stay valid. One exception on purpose: a ``learning_curve`` check that
still configures the agent-written ``curve.csv`` (``file``, ``min_rows``,
``declared_final``...) is refused with the reason, because the check now reads
the evaluator-measured curve and silently ignoring those settings would change
what an old config means.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AlgorithmAllowlistCheck",
    "ArchitectureCheck",
    "BudgetCheck",
    "Condition",
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
    """A field of a JSON evidence file (the declared algorithm) is in an allow-list.

    Nothing the evaluator or the harness observes shows which algorithm produced a set
    of weights, so this check can only be *declared*: a value outside the list fails
    it, a value inside is reported as "declared, not verified" and never makes the
    gate pass on its own (:func:`ale_robotics.scoring.gate.run_gate`).
    """

    kind: Literal["algorithm_allowlist"] = "algorithm_allowlist"
    file: str = "meta.json"
    field: str = "algorithm"
    allowed: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1,
        description="Accepted values, compared after stripping whitespace and case-folding.",
    )


class BudgetCheck(_CheckBase):
    """Training stayed within the task's compute budget, as those who can observe it measured it.

    The steps are the evaluator's own count of the run's practice steps (a task whose
    budget is in env steps keeps the simulator on the evaluator's side); the wall clock
    and CPU time are the harness's measurements of the agent. A step count the agent
    declares (``file``/``field``) is only compared with the evaluator's: claiming more
    training than the evaluator observed fails the check, and no declaration makes it
    pass.
    """

    kind: Literal["budget"] = "budget"
    max_steps: int = Field(
        gt=0, description="Most practice steps the evaluator may have counted for the run."
    )
    file: str | None = Field(
        default="meta.json",
        description="Evidence file whose 'field' declares the training steps (compared with "
        "the evaluator's count, never trusted); None: no declaration is read.",
    )
    field: str = "training_steps"


_AGENT_CURVE_FIELDS = ("file", "step_column", "value_column", "min_rows", "declared_final")


class LearningCurveCheck(_CheckBase):
    """The evaluator-measured learning curve shows training spread over the budget.

    Its points are the checkpoints the agent committed while it trained, each
    evaluated by the evaluator on hidden-seed episodes at the run's practice-step
    count of that moment. The check wants at least ``min_points`` of them at
    distinct, increasing step counts within the budget, no gap between consecutive
    ones (counting from step 0) larger than ``max_gap_fraction`` of the last one's
    steps, and the last one the very policy that was submitted. A checkpoint
    committed twice at one step count is no extra point and no fault, so
    committing more checkpoints never fails a curve that fewer would pass.

    Evidence that the run trained at all (a controller or weights brought in and
    committed at a handful of steps pass the rules above): ``min_steps``, the
    fewest practice steps counted at the last checkpoint, and
    ``min_improvement_se``, a rise of the curve above its first point by more than
    that many standard errors of the checkpoint episodes' pooled spread
    (:mod:`ale_robotics.scoring.curve_noise`). Both default to off, so that a task
    version configured before them is judged as its recorded runs were; a new
    version states them, with their source in ``note``.
    """

    kind: Literal["learning_curve"] = "learning_curve"
    min_points: int = Field(
        default=3,
        ge=1,
        description="Fewest evaluated checkpoints, at distinct practice-step counts, the "
        "curve must have.",
    )
    max_gap_fraction: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Largest gap, in practice steps, between consecutive checkpoints (and "
        "before the first, from step 0), as a fraction of the last checkpoint's steps.",
    )
    max_step: int | None = Field(
        default=None,
        gt=0,
        description="Most practice steps a checkpoint may have been taken at; None means the "
        "gate's budget check's max_steps (a gate without a budget check must set it).",
    )
    min_steps: int | None = Field(
        default=None,
        gt=0,
        description="Fewest practice steps the evaluator must have counted at the last "
        "checkpoint, from the paper's protocol (e.g. its first evaluation of a trained "
        "policy); None: no minimum (task versions configured before it).",
    )
    min_improvement_se: float | None = Field(
        default=None,
        ge=0,
        description="k: the best checkpoint after the first must beat the first one's mean "
        "return by more than k standard errors of the difference, from the per-episode "
        "spread pooled over the curve's checkpoints; None: not checked (task versions "
        "configured before it).",
    )
    note: str | None = Field(
        default=None,
        description="Where the thresholds come from (the paper's protocol, its source), for "
        "people reading the config; never read by the check.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_agent_curve(cls, data: object) -> object:
        """Say why the settings of the agent-written curve.csv are gone, not just 'extra'."""
        if isinstance(data, dict):
            old = [f for f in _AGENT_CURVE_FIELDS if f in data]
            if old:
                raise ValueError(
                    f"learning_curve: {', '.join(old)} configured the agent-written curve "
                    "(curve.csv), which can no longer make the check pass; the check reads "
                    "the evaluator-measured curve of committed checkpoints: set min_points "
                    "and max_gap_fraction instead"
                )
        return data


GateCheck = Annotated[
    ArchitectureCheck | AlgorithmAllowlistCheck | BudgetCheck | LearningCurveCheck,
    Field(discriminator="kind"),
]


class FaithfulnessGate(_Strict):
    """Declarative checks that a reproduction followed the paper's method.

    All checks run; the gate passes only when no check failed and at least one passed
    on verified evidence (fail closed): a declared check never passes it on its own.
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
        if all(isinstance(c, AlgorithmAllowlistCheck) for c in self.checks):
            raise ValueError(
                "scoring.gate.checks: only declared checks (algorithm_allowlist); the gate "
                "passes only with at least one verified check (architecture, budget, "
                "learning_curve), so it could never pass"
            )
        budget = self.budget_max_steps()
        for c in self.checks:
            if not isinstance(c, LearningCurveCheck):
                continue
            if c.max_step is None and budget is None:
                raise ValueError(
                    f"scoring.gate.checks.{check_name(c)}.max_step: required when the gate "
                    "has no budget check"
                )
            limit = c.max_step if c.max_step is not None else budget
            if c.min_steps is not None and limit is not None and c.min_steps > limit:
                raise ValueError(
                    f"scoring.gate.checks.{check_name(c)}.min_steps: {c.min_steps} is over "
                    f"the step limit {limit}, so the check could never pass"
                )
            if c.min_improvement_se is not None and c.min_points < 2:
                raise ValueError(
                    f"scoring.gate.checks.{check_name(c)}.min_improvement_se: needs "
                    "min_points of 2 or more (an improvement is between two checkpoints)"
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
    """How a task turns measured metrics into a score (see docs/architecture.md#scoring)."""

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
