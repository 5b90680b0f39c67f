"""The score report: the verdict of one evaluation, with everything needed to check it.

``result.json`` embeds this model and the harness prints :meth:`ScoreReport.score_line`;
both come from the same object so they cannot disagree. Numbers are stored
unrounded; rounding happens only in the human text. Non-finite measured values
are kept (a NaN is evidence) and serialized as the JSON strings ``"NaN"`` /
``"Infinity"``, which this model reads back, so the file stays strict JSON.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ale_robotics.scoring.gate import GateOutcome
from ale_robotics.tasks.manifest import Comparability, Statistic, TargetSource
from ale_robotics.tasks.spec import Direction

__all__ = ["ConditionResult", "PenaltyResult", "ScoreReport", "ScoreStatus", "fmt_number"]

ScoreStatus = Literal[
    "scored", "unscored", "no_result", "gate_failed", "invalid_measurement", "condition_failed"
]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, ser_json_inf_nan="strings", use_attribute_docstrings=True
    )


class PenaltyResult(_Model):
    """One safety penalty as applied."""

    metric: str
    """The safety metric's name."""
    kind: Literal["linear", "step"]
    """The penalty kind from the task config."""
    measured: float | None
    """The measured value; None when it was not measured (which zeroes the score)."""
    tolerance: float
    """The tolerance from the task config."""
    factor: float
    """Multiplier in [0, 1] applied to the score; 0 when the measurement is missing or invalid."""


class ConditionResult(_Model):
    """One scoring condition as checked."""

    metric: str
    """The metric the condition is on."""
    direction: Literal["at_least", "at_most"]
    """'at_least': met when measured >= threshold; 'at_most': measured <= threshold."""
    threshold: float
    """The threshold from the task config."""
    measured: float | None
    """The measured value; None when it was not measured."""
    met: bool
    """Whether the condition holds; never true for a missing or non-finite value."""


class ScoreReport(_Model):
    """How a task's measured metrics became (or did not become) a score.

    It carries no version of its own: it is stored inside ``result.json``, whose top-level
    ``schema_version`` covers it."""

    task_id: str
    """The task's id, e.g. 'td3-inverted-pendulum-v2'."""
    status: ScoreStatus
    """'scored'; 'unscored' (no synced paper target, score None); or why the score is 0:
    'gate_failed', 'invalid_measurement' (a metric the score needs is missing, non-finite or
    impossible), 'condition_failed'. When several apply, the first in that order is given."""
    primary_metric: str
    """Name of the metric normalized against the paper value."""
    direction: Direction
    """Whether a higher or a lower primary metric is better."""
    measured: dict[str, float]
    """Every metric the evaluator measured, as given (NaN kept)."""
    primary_measured: float | None
    """The primary metric's measured value; None when it was not measured."""
    target_value: float | None
    """The paper's value of the primary metric; None when the target is not synced."""
    target_source: TargetSource | None
    """Where the paper value comes from (paper, table/figure, page)."""
    target_confidence: Literal["confirmed", "approximate"] | None
    """How sure the manifest is of the paper value."""
    target_statistic: Statistic | None = None
    """Which statistic of the paper's training the value is: 'final_last_10_evaluations' or
    'final_at_budget' (a task scores one final policy, so never a peak); None without a target."""
    target_derivation: str | None = None
    """How the paper value was computed from published data when no table prints it ('' when
    it is read off a table); None without a target."""
    comparability: Comparability | None = None
    """What is not comparable between the paper's number and this measurement: the paper's
    environment and simulator versions, ours, and notes on each difference; None without a
    target."""
    ratio: float | None
    """Unclamped ratio: measured/paper (higher is better) or paper/max(measured, eps)
    (lower is better); None without a target or a valid measurement."""
    cap: float
    """Upper clamp of the score, from the task config."""
    eps: float
    """Floor of the measured value in lower-is-better ratios, from the task config."""
    base_score: float | None
    """The ratio clamped to [0, cap], before penalties and zeroing rules."""
    penalties: list[PenaltyResult]
    """Every safety penalty, in config order; their factors multiply."""
    conditions: list[ConditionResult]
    """Every condition, in config order; one unmet condition zeroes the score."""
    gate: GateOutcome | None
    """Faithfulness gate outcome; None when the task has no gate (not a reproduction)."""
    problems: list[str]
    """Why a measurement could not be used (missing, non-finite, negative); any zeroes the score."""
    score: float | None
    """The final score in [0, cap]; None only when status is 'unscored'."""
    score_interval: tuple[float, float] | None = None
    """The score at the two ends of the primary metric's 95% bootstrap interval over the
    episodes (the result's ``intervals``), other metrics as measured; None without one."""
    explanation: str
    """One paragraph saying, in words, how the score was reached."""
    abandoned_episodes: int = 0
    """Interactive eval sessions: episodes the agent did not finish (or never started),
    which the evaluator completed with the task's null action before measuring; 0 when
    the agent played every episode to its end (and for batch tasks)."""
    evaluated_episodes: int | None = None
    """Episodes the measurement covers, when the harness says (with abandoned_episodes)."""
    floor: float | None = None
    """The primary metric of doing nothing, measured by the evaluator on the same hidden
    seeds (the result's ``floor``: the task's null action, or its policy with zero
    weights); None when the result has none. Read beside the score, never part of it."""
    floor_policy: str | None = None
    """What the floor played: 'null_action' or 'zero_output'; None without a floor."""
    floor_normalized: float | None = None
    """``(measured - floor) / (target - floor)``: 0 at the floor, 1 at the paper's value,
    below 0 under the floor (unclamped); None unless the run is scored, has a floor and
    the paper's value is better than the floor."""

    def with_floor(self, floor: float, policy: str) -> ScoreReport:
        """This report with the floor of its primary metric beside the score (the score,
        status and explanation's verdict unchanged: the official score keeps the published
        formula)."""
        update: dict[str, object] = {"floor": floor, "floor_policy": policy}
        m, t = self.primary_measured, self.target_value
        if self.status == "scored" and m is not None and t is not None and math.isfinite(floor):
            better = t > floor if self.direction is Direction.HIGHER_IS_BETTER else t < floor
            if better and math.isfinite(m):
                update["floor_normalized"] = (m - floor) / (t - floor)
        update["explanation"] = f"{self.explanation} {_floor_text(floor, policy, update)}"
        return self.model_copy(update=update)

    def with_abandoned(self, abandoned: int, of: int) -> ScoreReport:
        """This report saying that ``abandoned`` of ``of`` episodes were completed with the
        null action (in the fields, the explanation and the score line).

        The score itself does not change: those episodes were measured as played, which
        is the point (stopping early scores exactly what the null action scores).
        """
        if abandoned < 0 or of < abandoned:
            raise ValueError(f"{abandoned} abandoned of {of} episodes is impossible")
        update: dict[str, object] = {"abandoned_episodes": abandoned, "evaluated_episodes": of}
        if abandoned:
            update["explanation"] = (
                f"{self.explanation} {_abandoned_text(abandoned, of)}: the agent did not finish "
                "them, so the evaluator played each to its end with the task's null action from "
                "where the agent left it, and they count as played."
            )
        return self.model_copy(update=update)

    def score_line(self) -> str:
        """The single line the harness prints, starting with ``score:``."""
        line = self._score_line()
        if self.abandoned_episodes and self.evaluated_episodes is not None:
            line += f" [{_abandoned_text(self.abandoned_episodes, self.evaluated_episodes)}]"
        if self.floor is not None:
            line += f" [floor {fmt_number(self.floor)}"
            if self.floor_normalized is not None:
                line += f", floor-normalized {self.floor_normalized:.3f}"
            line += "]"
        return line

    def _score_line(self) -> str:
        m = self.primary_metric
        shown = "missing" if self.primary_measured is None else fmt_number(self.primary_measured)
        if self.status == "unscored":
            return f"score: unscored: target not synced ({m} {shown})"
        value = 0.0 if self.score is None else self.score
        if self.status == "gate_failed":
            failure = self.gate.first_failure if self.gate is not None else None
            why = f"{failure.name}: {failure.reason}" if failure is not None else "no check passed"
            return f"score: {value:.3f} (faithfulness gate failed: {why})"
        if self.status == "no_result":
            why = self.problems[0] if self.problems else "the evaluator measured nothing"
            return f"score: {value:.3f} ({why})"
        if self.status == "invalid_measurement":
            why = self.problems[0] if self.problems else "a metric is unusable"
            return f"score: {value:.3f} (invalid measurement: {why})"
        if self.status == "condition_failed":
            unmet = next((c for c in self.conditions if not c.met), None)
            why = _condition_text(unmet) if unmet is not None else "a condition is unmet"
            return f"score: {value:.3f} (condition failed: {why})"
        paper = fmt_number(self.target_value) if self.target_value is not None else "?"
        if self.direction is Direction.LOWER_IS_BETTER:
            detail = f"paper {paper} / {m} {shown}, lower is better"
        else:
            detail = f"{m} {shown} / paper {paper}"
        if self.ratio is not None and self.ratio > self.cap:
            detail += f", capped at {fmt_number(self.cap)}"
        factor = math.prod(p.factor for p in self.penalties)
        if factor < 1.0:
            detail += f", safety x{factor:.3f}"
        if self.score_interval is not None:
            low, high = self.score_interval
            return f"score: {value:.3f} [95% {low:.3f}-{high:.3f}] ({detail})"
        return f"score: {value:.3f} ({detail})"


def fmt_number(x: float) -> str:
    """A measured or paper value for humans: '950.0', '0.05', '1.23457e+06', 'nan'."""
    if not math.isfinite(x):
        return str(x)
    text = f"{x:.6g}"
    return text if any(c in text for c in ".e") else f"{text}.0"


def _floor_text(floor: float, policy: str, update: dict[str, object]) -> str:
    """The explanation's sentence on the floor."""
    what = "its policy with every weight zero" if policy == "zero_output" else "the null action"
    text = (
        f"Doing nothing ({what}) measures {fmt_number(floor)} on the same hidden seeds "
        "(the floor; the score does not use it)"
    )
    normalized = update.get("floor_normalized")
    if isinstance(normalized, float):
        text += f"; from that floor to the paper's value, this run went {normalized:.3f} of the way"
    return text + "."


def _abandoned_text(abandoned: int, of: int) -> str:
    noun = "episode" if of == 1 else "episodes"
    return f"{abandoned} of {of} {noun} abandoned (completed with the null action)"


def _condition_text(c: ConditionResult) -> str:
    op = ">=" if c.direction == "at_least" else "<="
    got = "missing" if c.measured is None else fmt_number(c.measured)
    return f"{c.metric} {got}, needs {op} {fmt_number(c.threshold)}"
