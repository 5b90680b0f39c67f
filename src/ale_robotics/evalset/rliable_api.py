"""Typed, reproducible access to rliable: the only module that imports it.

Why rliable: it is the reference implementation of the statistics that RL papers now
report (Agarwal et al., "Deep RL at the Edge of the Statistical Precipice", NeurIPS
2021): the interquartile mean (IQM) and optimality gap of normalized scores, with
*stratified* bootstrap confidence intervals (runs are resampled within each task, so
every task keeps its weight), and performance profiles. Readers know these numbers
and plots; a home-made bootstrap would need its own justification.

rliable ships no type stubs, so it is imported here under ``type: ignore`` and every
function below has a typed signature; nothing else of ours touches it. It is also
imported lazily (about 1.5 s: arch, pandas, seaborn), so ``import
ale_robotics.evalset`` and the command line stay fast.

Reproducibility: rliable 1.2.0's ``StratifiedBootstrap.update_indices`` draws the
resampling indices with ``np.random.choice``, numpy's *global* legacy generator, so
its ``random_state`` argument does not make a result reproducible (and arch warns
that it is deprecated). Each estimate here therefore seeds that global generator
with the caller's seed, and restores its previous state afterwards, so no other
code's random numbers change. One seed per estimate (not one stream for a whole
set) keeps an estimate independent of which other estimates were computed first.
Not thread-safe, for the same reason: estimates are computed one at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "METRICS",
    "FloatArray",
    "Metric",
    "interval_estimate",
    "performance_profile",
    "plot_interval_estimates",
    "plot_performance_profiles",
    "seeded_global_rng",
]

FloatArray = npt.NDArray[np.float64]

Metric = Literal["mean", "median", "iqm", "optimality_gap"]
"""rliable's aggregate metrics over a (runs x tasks) score matrix: the mean (and
median) of the per-task mean scores, the IQM (25% trimmed mean of all runs of all
tasks) and the optimality gap (how far the scores fall short of 1.0, the paper's
value: ``1 - mean(min(score, 1))``; lower is better)."""

METRICS: tuple[Metric, ...] = ("median", "iqm", "mean", "optimality_gap")
"""All of them, in the order rliable's own plots show them."""


@contextlib.contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """numpy's global legacy generator seeded with ``seed`` inside the block, its
    previous state back afterwards (rliable resamples with it; see the module doc)."""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def _core() -> tuple[Any, Any]:
    """``rliable.library`` and ``rliable.metrics`` (imported on first use; untyped)."""
    # rliable has no stubs: mypy reports that once, at whichever of these imports it
    # checks first, hence "unused-ignore" on both
    from rliable import library, metrics  # type: ignore[import-untyped, unused-ignore]

    return library, metrics


def _plot_utils() -> Any:
    """``rliable.plot_utils`` (pulls in seaborn and pyplot: only for figures)."""
    from rliable import plot_utils  # type: ignore[import-untyped, unused-ignore]

    return plot_utils


def _metric_functions() -> dict[Metric, Callable[[FloatArray], float]]:
    _, metrics = _core()
    return {
        "mean": metrics.aggregate_mean,
        "median": metrics.aggregate_median,
        "iqm": metrics.aggregate_iqm,
        "optimality_gap": metrics.aggregate_optimality_gap,
    }


def _matrix(scores: npt.ArrayLike) -> FloatArray:
    m = np.asarray(scores, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
        raise ValueError(f"scores must be a non-empty (runs x tasks) matrix, not {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError("scores must be finite")
    return m


def interval_estimate(
    scores: npt.ArrayLike,
    metrics: Sequence[Metric],
    *,
    reps: int,
    confidence: float,
    seed: int,
) -> tuple[FloatArray, FloatArray]:
    """Point estimates and stratified-bootstrap percentile intervals of ``metrics``.

    ``scores`` is a (runs x tasks) matrix. Returns ``(points, intervals)``: ``points``
    has one value per metric, ``intervals`` is (2 x metrics), lower bounds first; the
    interval of every metric comes from the same resamples (rliable's convention).
    """
    library, _ = _core()
    matrix = _matrix(scores)
    funcs = _metric_functions()
    chosen = [funcs[m] for m in metrics]

    def aggregate(x: FloatArray) -> FloatArray:
        return np.array([f(x) for f in chosen], dtype=np.float64)

    with seeded_global_rng(seed):
        points, intervals = library.get_interval_estimates(
            {"x": matrix},
            aggregate,
            reps=reps,
            confidence_interval_size=confidence,
        )
    return np.asarray(points["x"], dtype=np.float64), np.asarray(intervals["x"], np.float64)


def performance_profile(
    scores: npt.ArrayLike,
    taus: npt.ArrayLike,
    *,
    reps: int,
    confidence: float,
    seed: int,
) -> tuple[FloatArray, FloatArray]:
    """The score distribution (fraction of all runs, over all tasks, scoring above each
    ``tau``) with stratified-bootstrap intervals: ``(profile, intervals)``, ``profile``
    one value per tau and ``intervals`` (2 x taus)."""
    library, _ = _core()
    matrix = _matrix(scores)
    tau_list = np.asarray(taus, dtype=np.float64)
    with seeded_global_rng(seed):
        profiles, cis = library.create_performance_profile(
            {"x": matrix}, tau_list, reps=reps, confidence_interval_size=confidence
        )
    return np.asarray(profiles["x"], dtype=np.float64), np.asarray(cis["x"], np.float64)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window (and no display needed)
    import matplotlib.pyplot as plt

    return plt


PANEL_COLUMNS = 2
"""Panels per row of an interval-estimate figure: two panels of rliable's width make a
figure about 750 px wide, which a report shows at half a page (about 560 px) with its
text still readable; rliable's own row of four was 1,450 px, its text shrunk to a
third."""


def plot_interval_estimates(
    points: Mapping[str, FloatArray],
    intervals: Mapping[str, FloatArray],
    metric_names: Sequence[str],
    path: Path,
    *,
    xlabel: str,
    title: str | None = None,
    columns: int = PANEL_COLUMNS,
) -> Path:
    """rliable's interval-estimate plot, saved as a PNG at ``path``: a panel per metric, a
    bar per agent spanning its interval with a tick at the point estimate, in rliable's
    colours and style; the panels in rows of at most ``columns`` (rliable's own function
    puts them all in one row, unreadable at half a page's width)."""
    import math

    plt = _pyplot()
    plot_utils = _plot_utils()

    from matplotlib.ticker import FuncFormatter, MultipleLocator

    algorithms = list(points)
    # rliable's default palette
    palette = plot_utils.sns.color_palette("colorblind", n_colors=len(algorithms))
    colors = dict(zip(algorithms, palette, strict=True))
    n = len(metric_names)
    cols = max(1, min(columns, n))
    rows = math.ceil(n / cols)
    bar = 0.6  # rliable's interval height
    panel_h = 0.5 * len(algorithms) + 1.1
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.6 * cols, panel_h * rows), squeeze=False, layout="constrained"
    )
    # Normalized scores: every panel spans at least 0 to 1 (the paper), so panels and
    # figures compare at a glance (rliable fits each panel to its own bars).
    finite = [iv for iv in intervals.values() if np.isfinite(iv).any()]
    lo = min([0.0, *(float(np.nanmin(iv[0])) for iv in finite)])
    hi = max([1.0, *(float(np.nanmax(iv[1])) for iv in finite)])
    pad = 0.03 * (hi - lo)
    for j, name in enumerate(metric_names):
        ax = axes[j // cols][j % cols]
        for k, alg in enumerate(algorithms):
            low, high = intervals[alg][:, j]
            if np.isfinite(low) and np.isfinite(high):
                # an interval of width ~0 (identical scores) is drawn as a sliver
                width = max(float(high - low), 0.01 * (hi - lo))
                left = (low + high) / 2 - width / 2
                ax.barh(y=k, width=width, height=bar, left=left, color=colors[alg], alpha=0.75)
            ax.vlines(
                x=points[alg][j],
                ymin=k - 7.5 * bar / 16,
                ymax=k + 6 * bar / 16,
                color="k",
                alpha=0.5,
            )
        ax.set_yticks(range(len(algorithms)))
        ax.set_yticklabels(algorithms if j % cols == 0 else [], fontsize="large")
        ax.set_ylim(-0.6, len(algorithms) - 0.4)
        ax.set_title(name, fontsize="x-large")
        ax.set_xlim(lo - pad, hi + pad)
        ax.xaxis.set_major_locator(MultipleLocator(0.5 if hi - lo <= 2.5 else 1.0))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.tick_params(axis="x", labelsize="large", length=0.1, width=0.1)
        ax.tick_params(axis="y", length=0)
        for side in ("right", "top", "left"):
            ax.spines[side].set_visible(False)
        ax.spines["bottom"].set_linewidth(2)
        ax.spines["bottom"].set_position(("outward", 5))
        ax.grid(True, axis="x", alpha=0.25)
    for j in range(n, rows * cols):  # an odd count leaves a cell empty
        axes[j // cols][j % cols].set_visible(False)
    fig.supxlabel(xlabel, fontsize="x-large")
    if title:
        fig.suptitle(title, fontsize="large")
    try:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def plot_performance_profiles(
    profiles: Mapping[str, FloatArray],
    intervals: Mapping[str, FloatArray],
    taus: FloatArray,
    path: Path,
    *,
    title: str | None = None,
) -> Path:
    """rliable's performance-profile plot (fraction of runs above each normalized
    score, shaded interval per agent), with a line at 1.0 (the paper), as a PNG."""
    plt = _pyplot()
    plot_utils = _plot_utils()

    fig, ax = plt.subplots(figsize=(7, 4.2))
    try:
        plot_utils.plot_performance_profiles(
            dict(profiles),
            taus,
            performance_profile_cis=dict(intervals),
            ax=ax,
            xlabel=r"Normalized score $\tau$ (1.0 = paper)",
            ylabel=r"Fraction of runs with score $> \tau$",
            labelsize="large",
            ticklabelsize="large",
            legend=True,
            legendsize="medium",
        )
        ax.axvline(1.0, color="0.4", linestyle="--", linewidth=1)
        if title:
            ax.set_title(title, fontsize="large")
        fig.savefig(path, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path
