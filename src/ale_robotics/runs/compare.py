"""Runs side by side: each metric, its difference to the first run, and whether that
difference is within the noise of the episodes.

Two evaluations of one policy on different hidden seeds differ; a difference
between two runs means something only when it is larger than that. The spread used
is the per-episode standard deviation of the primary metric (the population one,
as the evaluator's ``std_return``): a difference no larger than the larger of the
two runs' spreads is called within it. That is a rule of thumb for a person looking
at two runs, not a test; eval sets (repetitions, bootstrap intervals) are for that.

Numbers are shown at a precision that matches what they can tell (:func:`shown_decimals`):
scores to 3 decimals, as everywhere; another metric to 4 significant digits of its
row's largest value, and no finer than the primary metric's standard error over the
episodes allows. A difference smaller than half the last shown digit is no difference
at that precision and reads ``0.000 (same)`` (:func:`diff_text`), never ``5.298e-06``.
The values and differences themselves are kept whole (``--json``).

Where a comparison will carry an interval for a difference (bootstrap over the
episodes, issue 27), :func:`diff_text` takes it and says when it covers 0; nothing
else about the display changes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.runs.summary import RunSummary

__all__ = [
    "COMPARE_SCHEMA_VERSION",
    "SCORE_DECIMALS",
    "Comparison",
    "MetricRow",
    "compare",
    "diff_text",
    "fmt_fixed",
    "is_same",
    "shown_decimals",
    "spread",
]

COMPARE_SCHEMA_VERSION: Literal[1] = 1
SCORE_DECIMALS = 3
"""Scores are shown to 3 decimals everywhere (the run's own score line does so)."""
SIGNIFICANT = 4
"""Significant digits of a row's largest value shown for a metric other than the score."""
MAX_DECIMALS = 6


class MetricRow(BaseModel):
    """One metric across the compared runs (one entry per run, in their order)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(description="'score' or a metric the evaluator measured.")
    primary: bool = Field(description="The primary metric (the one the score normalizes).")
    values: list[float | None] = Field(description="Each run's value; None: not measured.")
    diffs: list[float | None] = Field(
        description="Each run's value minus the first run's; None for the first run, and "
        "where either value is missing or the runs are of different tasks."
    )
    within_spread: list[bool | None] = Field(
        description="Primary metric only: |diff| <= the larger per-episode std of the two "
        "runs; None for the first run, other metrics, and runs without per-episode values."
    )
    decimals: int = Field(
        default=SCORE_DECIMALS,
        description="Digits after the point the row's values and differences are shown "
        "with (the values and diffs here are whole).",
    )
    same: list[bool | None] = Field(
        default_factory=list,
        description="Each diff is smaller than the shown precision (shown '0.000 (same)'); "
        "None where diffs is None.",
    )


class Comparison(BaseModel):
    """What ``runs compare`` shows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = COMPARE_SCHEMA_VERSION
    runs: list[RunSummary]
    spreads: list[float | None] = Field(
        description="Each run's per-episode std of its primary metric; None without values."
    )
    rows: list[MetricRow]
    notes: list[str] = Field(description="What makes parts of the comparison meaningless.")


def spread(values: Sequence[float]) -> float | None:
    """The population std of per-episode values; None for none."""
    return statistics.pstdev(values) if values else None


def _finite(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def shown_decimals(
    metric: str, values: Iterable[float | None], standard_errors: Iterable[float | None] = ()
) -> int:
    """The digits after the point a row is shown with (module docstring): 3 for the score;
    else 4 significant digits of the largest value, fewer when the smallest non-zero
    standard error (per-episode std / sqrt(episodes)) has its second significant digit
    above them; 0 to 6."""
    if metric == "score":
        return SCORE_DECIMALS
    top = max((abs(v) for v in _finite(values)), default=0.0)
    decimals = MAX_DECIMALS if top == 0 else SIGNIFICANT - 1 - math.floor(math.log10(top))
    errors = [e for e in _finite(standard_errors) if e > 0]
    if errors:
        decimals = min(decimals, 1 - math.floor(math.log10(min(errors))))
    return max(0, min(MAX_DECIMALS, decimals))


def fmt_fixed(value: float | None, decimals: int) -> str:
    """``value`` at ``decimals`` digits after the point; '-' for None, 'nan' and 'inf' as
    they are, never '-0.000'."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def is_same(diff: float, decimals: int) -> bool:
    """True when ``diff`` rounds to 0 at ``decimals`` (smaller than the shown precision)."""
    return abs(diff) < 0.5 * 10.0**-decimals


def diff_text(
    diff: float | None,
    decimals: int,
    within: bool | None = None,
    interval: tuple[float, float] | None = None,
) -> str:
    """A difference as the comparison shows it: '+0.012', '-3.4 ≠', '0.000 (same)'.

    ``within``: whether it is within the episodes' spread (' ≈' / ' ≠'); ``interval``:
    its confidence interval when one was computed, said to cover 0 when it does (then the
    difference is not told apart from none). '' for None.
    """
    if diff is None:
        return ""
    if is_same(diff, decimals):
        return f"{fmt_fixed(0.0, decimals)} (same)"
    text = f"{diff:+.{decimals}f}"
    if interval is not None:
        low, high = interval
        text += f" [{low:+.{decimals}f}, {high:+.{decimals}f}]"
        if low <= 0 <= high:
            return text + " (interval covers 0)"
    return text + ("" if within is None else " ≈" if within else " ≠")


def _diff(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return b - a


def compare(runs: Sequence[RunSummary]) -> Comparison:
    """``runs`` side by side, each against the first (``runs`` must not be empty)."""
    if not runs:
        raise ValueError("compare needs at least one run")
    first = runs[0]
    spreads = [spread(r.episode_values) for r in runs]
    comparable = [r.task_id == first.task_id for r in runs]
    notes: list[str] = []
    for r, ok in zip(runs, comparable, strict=True):
        if not ok:
            notes.append(
                f"{r.run_id} is of task {r.task_id}, not {first.task_id}: its values are "
                "shown, not compared"
            )
        elif r.state != "completed":
            notes.append(f"{r.run_id} {r.state} before a verdict: it has no metrics")
        elif r.smoke_episodes is not None:
            notes.append(
                f"{r.run_id} is a smoke run ({r.smoke_episodes} of {r.smoke_of} episodes): "
                "its values are of fewer episodes"
            )
        if r.state == "completed" and not r.verified:
            why = r.verification.reason if r.verification is not None else "not checked"
            notes.append(
                f"{r.run_id} is UNVERIFIED: its result.json disagrees with its signed events, "
                f"so its values are claims, not measurements ({why})"
            )
    names = ["score"]
    for r in runs:
        for name in ([r.primary_metric] if r.primary_metric else []) + list(r.metrics):
            if name not in names:
                names.append(name)
    rows: list[MetricRow] = []
    errors = [
        None if sd is None else sd / math.sqrt(len(r.episode_values))
        for sd, r in zip(spreads, runs, strict=True)
    ]
    for name in names:
        values = [r.score if name == "score" else r.metrics.get(name) for r in runs]
        is_primary = name != "score" and name == first.primary_metric
        decimals = shown_decimals(name, values, errors if is_primary else ())
        diffs: list[float | None] = [None]
        within: list[bool | None] = [None]
        for i in range(1, len(runs)):
            d = _diff(values[0], values[i]) if comparable[i] else None
            diffs.append(d)
            wide = [s for s in (spreads[0], spreads[i]) if s is not None]
            same_metric = runs[i].primary_metric == first.primary_metric
            if is_primary and d is not None and len(wide) == 2 and same_metric:
                within.append(abs(d) <= max(wide))
            else:
                within.append(None)
        rows.append(
            MetricRow(
                metric=name,
                primary=is_primary,
                values=values,
                diffs=diffs,
                within_spread=within,
                decimals=decimals,
                same=[None if d is None else is_same(d, decimals) for d in diffs],
            )
        )
    return Comparison(runs=list(runs), spreads=spreads, rows=rows, notes=notes)
