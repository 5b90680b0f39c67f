"""The eval set's figures, drawn with rliable's own plotting functions.

People who read RL results with intervals know rliable's two figures, so those are
the ones drawn: interval estimates (a panel per metric, a bar per agent spanning the
interval with a tick at the point estimate; in rliable's style, two panels to a row so
that the figure reads at half a report page, :func:`.rliable_api.plot_interval_estimates`)
and performance profiles (the fraction of runs above each normalized score, with a
shaded interval). A figure that cannot
be drawn is logged and skipped; the numbers are already written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ale_robotics.evalset import rliable_api
from ale_robotics.evalset.aggregate import EvalSetAggregate, Interval

__all__ = ["INTERVALS_PNG", "PER_TASK_PNG", "PROFILE_PNG", "draw_plots"]

log = logging.getLogger(__name__)

INTERVALS_PNG = "interval_estimates.png"
"""Per agent across tasks: median, IQM, mean and optimality gap with intervals."""
PER_TASK_PNG = "per_task_iqm.png"
"""Per task (a panel each): every agent's IQM with its interval."""
PROFILE_PNG = "performance_profile.png"
"""Per agent: the score distribution over all runs of all tasks."""

_METRIC_TITLES = {
    "median": "Median",
    "iqm": "IQM",
    "mean": "Mean",
    "optimality_gap": "Optimality Gap",
}


def _arrays(ivs: list[Interval | None]) -> tuple[np.ndarray, np.ndarray]:
    nan = float("nan")
    points = np.array([iv.value if iv else nan for iv in ivs], dtype=np.float64)
    cis = np.array(
        [[iv.low if iv else nan for iv in ivs], [iv.high if iv else nan for iv in ivs]],
        dtype=np.float64,
    )
    return points, cis


def _subtitle(agg: EvalSetAggregate) -> str:
    smoke = f", smoke runs of {agg.smoke_episodes} episode(s)" if agg.smoke_episodes else ""
    pct = f"{agg.bootstrap.confidence:.0%}"
    return f"{agg.set_name}: {pct} stratified-bootstrap CIs, {agg.repetitions} rep(s){smoke}"


def draw_plots(agg: EvalSetAggregate, out_dir: Path) -> list[Path]:
    """Draw every figure the aggregate has data for into ``out_dir``; returns them."""
    written: list[Path] = []
    title = _subtitle(agg)
    agents = [a for a in agg.agents if a.iqm is not None]
    jobs: list[tuple[str, Callable[[Path], Path]]] = []
    if agents:
        points: dict[str, np.ndarray] = {}
        cis: dict[str, np.ndarray] = {}
        for a in agents:
            points[a.label], cis[a.label] = _arrays([getattr(a, m) for m in rliable_api.METRICS])
        jobs.append(
            (
                INTERVALS_PNG,
                lambda p: rliable_api.plot_interval_estimates(
                    points,
                    cis,
                    [_METRIC_TITLES[m] for m in rliable_api.METRICS],
                    p,
                    xlabel="Normalized score (1.0 = paper)",
                    title=title,
                ),
            )
        )
    cells = {(c.task_id, c.label): c for c in agg.cells}
    task_points: dict[str, np.ndarray] = {}
    task_cis: dict[str, np.ndarray] = {}
    for label in agg.labels:
        ivs = [cells[(t, label)].iqm for t in agg.tasks]
        if any(iv is not None for iv in ivs):
            task_points[label], task_cis[label] = _arrays(ivs)
    if task_points:
        jobs.append(
            (
                PER_TASK_PNG,
                lambda p: rliable_api.plot_interval_estimates(
                    task_points,
                    task_cis,
                    agg.tasks,
                    p,
                    xlabel="IQM of normalized scores (1.0 = paper)",
                    title=title,
                ),
            )
        )
    profiles = agg.profiles
    if profiles is not None and profiles.agents:
        taus = np.array(profiles.taus, dtype=np.float64)
        curves = {c.label: np.array(c.fraction, dtype=np.float64) for c in profiles.agents}
        bands = {c.label: np.array([c.low, c.high], dtype=np.float64) for c in profiles.agents}
        jobs.append(
            (
                PROFILE_PNG,
                lambda p: rliable_api.plot_performance_profiles(
                    curves, bands, taus, p, title=title
                ),
            )
        )
    for name, draw in jobs:
        path = out_dir / name
        try:
            written.append(draw(path))
        except Exception as exc:  # a figure never costs the aggregate
            log.warning(
                "%s not drawn (%s: %s); aggregate.json is complete", name, type(exc).__name__, exc
            )
    return written
