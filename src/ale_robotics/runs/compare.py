"""Runs side by side: each metric, its difference to the first run, and whether that
difference is within the noise of the episodes.

Two evaluations of one policy on different hidden seeds differ; a difference
between two runs means something only when it is larger than that. The spread used
is the per-episode standard deviation of the primary metric (the population one,
as the evaluator's ``std_return``): a difference no larger than the larger of the
two runs' spreads is called within it. That is a rule of thumb for a person looking
at two runs, not a test; eval sets (repetitions, bootstrap intervals) are for that.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.runs.summary import RunSummary

__all__ = ["COMPARE_SCHEMA_VERSION", "Comparison", "MetricRow", "compare", "spread"]

COMPARE_SCHEMA_VERSION: Literal[1] = 1


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
    names = ["score"]
    for r in runs:
        for name in ([r.primary_metric] if r.primary_metric else []) + list(r.metrics):
            if name not in names:
                names.append(name)
    rows: list[MetricRow] = []
    for name in names:
        values = [r.score if name == "score" else r.metrics.get(name) for r in runs]
        is_primary = name != "score" and name == first.primary_metric
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
                metric=name, primary=is_primary, values=values, diffs=diffs, within_spread=within
            )
        )
    return Comparison(runs=list(runs), spreads=spreads, rows=rows, notes=notes)
