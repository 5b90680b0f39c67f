"""Runs side by side: each metric, its difference to the first run, and whether that
difference is told apart from the noise of the episodes.

Two evaluations of one policy on different hidden seeds differ. The difference of the
primary metric therefore comes with a 95% percentile-bootstrap interval of the
difference of the two runs' per-episode means (:func:`difference_interval`, SciPy's
``bootstrap``, seeded: the same runs always give the same interval): paired by episode
index when the two runs played the same hidden seeds (equal seed commitments, in order),
unpaired otherwise. A difference "differs" only when its interval excludes 0. This is
the noise of one policy's evaluation; the noise of training is what eval sets'
repetitions measure.

Numbers are shown at a precision that matches what they can tell (:func:`shown_decimals`):
scores to 3 decimals, as everywhere; another metric to 4 significant digits of its
row's largest value, and no finer than the primary metric's standard error over the
episodes allows. A difference smaller than half the last shown digit is no difference
at that precision and reads ``0.000 (same)`` (:func:`diff_text`), never ``5.298e-06``.
The row of per-episode spreads has one format too (:mod:`.numbers`). The values and
differences themselves are kept whole (``--json``).
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import bootstrap

from ale_robotics.runs.numbers import MAX_DECIMALS, column_decimals, fmt_fixed
from ale_robotics.runs.summary import RunSummary

__all__ = [
    "COMPARE_SCHEMA_VERSION",
    "SCORE_DECIMALS",
    "Comparison",
    "MetricRow",
    "compare",
    "diff_text",
    "difference_interval",
    "fmt_fixed",
    "is_same",
    "shown_decimals",
    "spread",
]

COMPARE_SCHEMA_VERSION: Literal[2] = 2
SCORE_DECIMALS = 3
"""Scores are shown to 3 decimals everywhere (the run's own score line does so)."""
SIGNIFICANT = 4
"""Significant digits of a row's largest value shown for a metric other than the score
(fewer when the episodes' standard error says the last ones are noise)."""
CONFIDENCE = 0.95
RESAMPLES = 9999
BOOTSTRAP_SEED = 0


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
    intervals: list[tuple[float, float] | None] = Field(
        default_factory=list,
        description="Primary metric only: the 95% bootstrap interval of each diff over the "
        "episodes; None for the first run, other metrics, and runs without two or more "
        "per-episode values.",
    )
    paired: list[bool | None] = Field(
        default_factory=list,
        description="Whether each interval paired the episodes by index (the runs played "
        "the same hidden seeds); None where there is no interval.",
    )
    differs: list[bool | None] = Field(
        default_factory=list,
        description="The interval excludes 0: the difference is told apart from the "
        "episodes' noise; None where there is no interval.",
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

    schema_version: Literal[2] = COMPARE_SCHEMA_VERSION
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
    finite = _finite(values)
    top = max((abs(v) for v in finite), default=0.0)
    decimals = MAX_DECIMALS if top == 0 else column_decimals(finite, SIGNIFICANT)
    errors = [e for e in _finite(standard_errors) if e > 0]
    if errors:
        decimals = min(decimals, 1 - math.floor(math.log10(min(errors))))
    return max(0, min(MAX_DECIMALS, decimals))


def is_same(diff: float, decimals: int) -> bool:
    """True when ``diff`` rounds to 0 at ``decimals`` (smaller than the shown precision)."""
    return abs(diff) < 0.5 * 10.0**-decimals


def diff_text(
    diff: float | None, decimals: int, interval: tuple[float, float] | None = None
) -> str:
    """A difference as the comparison shows it: '+0.012', '0.000 (same)', and with its
    interval '-3.4 [-5.1, -1.8] differs' or '+0.2 [-0.1, +0.5] (interval covers 0)'.
    '' for None."""
    if diff is None:
        return ""
    if is_same(diff, decimals):
        return f"{fmt_fixed(0.0, decimals)} (same)"
    text = f"{diff:+.{decimals}f}"
    if interval is None:
        return text
    low, high = interval
    text += f" [{low:+.{decimals}f}, {high:+.{decimals}f}]"
    return text + (" (interval covers 0)" if low <= 0 <= high else " differs")


def difference_interval(
    first: Sequence[float], other: Sequence[float], *, paired: bool
) -> tuple[float, float] | None:
    """The 95% percentile-bootstrap interval of ``mean(other) - mean(first)`` (module
    docstring); None when either has fewer than 2 values, or a paired pair differs in length."""
    if len(first) < 2 or len(other) < 2 or (paired and len(first) != len(other)):
        return None

    def mean_difference(a: Any, b: Any, axis: int) -> Any:
        return np.mean(b, axis=axis) - np.mean(a, axis=axis)

    with warnings.catch_warnings():  # constant values: a degenerate (zero-width) interval
        warnings.simplefilter("ignore")
        res = bootstrap(
            (np.asarray(first, dtype=np.float64), np.asarray(other, dtype=np.float64)),
            mean_difference,
            paired=paired,
            vectorized=True,
            n_resamples=RESAMPLES,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return low, high


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
        intervals: list[tuple[float, float] | None] = [None]
        paired: list[bool | None] = [None]
        for i in range(1, len(runs)):
            d = _diff(values[0], values[i]) if comparable[i] else None
            diffs.append(d)
            same_metric = runs[i].primary_metric == first.primary_metric
            iv, pair = None, None
            if is_primary and d is not None and same_metric:
                pair = bool(first.episode_seeds) and first.episode_seeds == runs[i].episode_seeds
                iv = difference_interval(first.episode_values, runs[i].episode_values, paired=pair)
            intervals.append(iv)
            paired.append(None if iv is None else pair)
        rows.append(
            MetricRow(
                metric=name,
                primary=is_primary,
                values=values,
                diffs=diffs,
                intervals=intervals,
                paired=paired,
                differs=[None if iv is None else not (iv[0] <= 0 <= iv[1]) for iv in intervals],
                decimals=decimals,
                same=[None if d is None else is_same(d, decimals) for d in diffs],
            )
        )
    return Comparison(runs=list(runs), spreads=spreads, rows=rows, notes=notes)
