"""The eval set's figures, drawn with rliable's own plotting functions.

People who read RL results with intervals know rliable's two figures, so those are
the ones drawn: interval estimates (a panel per metric, a bar per agent spanning the
interval with a tick at the point estimate; in rliable's style, two panels to a row so
that the figure reads at half a report page, :func:`.rliable_api.plot_interval_estimates`)
and performance profiles (the fraction of runs above each normalized score, with a
shaded interval). Beside them, what HAL draws: each agent's mean score against its mean
model tokens per run, both with their intervals, and the Pareto frontier of the two
(:mod:`.cost`); only a set with model tokens has it (``no_cost_plot`` says why not). A
figure that cannot be drawn is logged and skipped; the numbers are already written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ale_robotics.evalset import rliable_api
from ale_robotics.evalset.aggregate import EvalSetAggregate, Interval

__all__ = ["COST_PNG", "INTERVALS_PNG", "PER_TASK_PNG", "PROFILE_PNG", "draw_plots"]

log = logging.getLogger(__name__)

INTERVALS_PNG = "interval_estimates.png"
"""Per agent across tasks: median, IQM, mean and optimality gap with intervals."""
PER_TASK_PNG = "per_task_iqm.png"
"""Per task (a panel each): every agent's IQM with its interval."""
PROFILE_PNG = "performance_profile.png"
"""Per agent: the score distribution over all runs of all tasks."""
COST_PNG = "score_vs_tokens.png"
"""Per agent: mean score against mean model tokens per run, with the Pareto frontier."""

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
    if agg.no_cost_plot is None:
        jobs.append((COST_PNG, lambda p: plot_score_vs_tokens(agg, p, title=title)))
    for name, draw in jobs:
        path = out_dir / name
        try:
            written.append(draw(path))
        except Exception as exc:  # a figure never costs the aggregate
            log.warning(
                "%s not drawn (%s: %s); aggregate.json is complete", name, type(exc).__name__, exc
            )
    return written


def _tokens_label(value: float, _pos: object = None) -> str:
    """An axis tick of tokens: '800', '12k', '1.5M'."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def plot_score_vs_tokens(agg: EvalSetAggregate, path: Path, *, title: str | None = None) -> Path:
    """Each placed agent's mean score (y) against its mean model tokens per run (x), with
    both intervals as error bars, the agents on the Pareto frontier filled and joined by
    the frontier's steps (higher score, fewer tokens: up and to the left is better), the
    others hollow; a log x axis when the tokens span more than a factor of 20."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window (as rliable_api's figures)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    placed = [c for c in agg.cost if c.pareto is not None and c.tokens and c.score]
    colors = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    try:
        for i, c in enumerate(placed):
            assert c.tokens is not None and c.score is not None
            x, y = c.tokens.value, c.score.value
            ax.errorbar(
                x,
                y,
                xerr=[[x - c.tokens.low], [c.tokens.high - x]],
                yerr=[[y - c.score.low], [c.score.high - y]],
                fmt="o",
                markersize=9,
                color=colors(i % 10),
                markerfacecolor=colors(i % 10) if c.pareto else "white",
                capsize=4,
                label=f"{c.label}{' (frontier)' if c.pareto else ''}",
            )
            ax.annotate(
                c.label, (x, y), textcoords="offset points", xytext=(8, 6), fontsize="medium"
            )
        frontier = sorted(
            (c.tokens.value, c.score.value) for c in placed if c.pareto and c.tokens and c.score
        )
        if len(frontier) > 1:
            xs, ys = zip(*frontier, strict=True)
            ax.step(xs, ys, where="post", color="0.4", linestyle="--", linewidth=1, zorder=0)
        tokens = [c.tokens.value for c in placed if c.tokens]
        if min(tokens) > 0 and max(tokens) / min(tokens) > 20:
            ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(_tokens_label))
        ax.axhline(1.0, color="0.6", linestyle=":", linewidth=1)
        ax.set_xlabel("Model tokens per run (input + output), mean", fontsize="large")
        ax.set_ylabel("Mean normalized score (1.0 = paper)", fontsize="large")
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize="medium", loc="best")
        ax.margins(x=0.15, y=0.15)
        unplaced = [c.label for c in agg.cost if c not in placed]
        if unplaced:
            ax.text(
                0.0,
                -0.2,
                f"not placed (no tokens per run or no score): {', '.join(unplaced)}",
                transform=ax.transAxes,
                fontsize="medium",
                color="0.35",
                va="top",
            )
        if title:
            ax.set_title(title, fontsize="large")
        fig.savefig(path, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path
