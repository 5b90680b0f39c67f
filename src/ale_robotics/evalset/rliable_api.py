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
import warnings
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


def plot_interval_estimates(
    points: Mapping[str, FloatArray],
    intervals: Mapping[str, FloatArray],
    metric_names: Sequence[str],
    path: Path,
    *,
    xlabel: str,
    title: str | None = None,
) -> Path:
    """rliable's interval-estimate plot (a panel per metric, a bar per agent: the
    interval, with a tick at the point estimate), saved as a PNG at ``path``."""
    plt = _pyplot()
    plot_utils = _plot_utils()

    from matplotlib.ticker import FuncFormatter, MultipleLocator

    algorithms = list(points)
    # rliable's default palette, named here so the slivers below match the bars
    palette = plot_utils.sns.color_palette("colorblind", n_colors=len(algorithms))
    colors = dict(zip(algorithms, palette, strict=True))
    row_height = 0.6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tight layout on tiny panels
        fig, axes = plot_utils.plot_interval_estimates(
            dict(points),
            dict(intervals),
            metric_names=list(metric_names),
            algorithms=algorithms,
            colors=colors,
            xlabel=xlabel,
            subfigure_width=3.4,
            row_height=row_height,
            xlabel_y_coordinate=-0.45 / (row_height * len(algorithms)) - 0.05,
            wspace=0.25,
        )
        # Normalized scores: every panel spans at least 0 to 1 (the paper), so panels
        # and figures compare at a glance (rliable fits each panel to its own bars).
        finite = [iv for iv in intervals.values() if np.isfinite(iv).any()]
        lo = min([0.0, *(float(np.nanmin(iv[0])) for iv in finite)])
        hi = max([1.0, *(float(np.nanmax(iv[1])) for iv in finite)])
        pad = 0.03 * (hi - lo)
        panels = list(np.atleast_1d(axes))
        for j, ax in enumerate(panels):
            ax.set_xlim(lo - pad, hi + pad)
            ax.xaxis.set_major_locator(MultipleLocator(0.5 if hi - lo <= 2.5 else 1.0))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            # an interval of width ~0 (every resample alike: identical scores) would be
            # an invisible bar; draw it as a sliver in the agent's color instead
            for k, alg in enumerate(algorithms):
                low, high = intervals[alg][:, j]
                if np.isfinite(low) and high - low < 0.01 * (hi - lo):
                    ax.barh(y=k, width=0.01 * (hi - lo), height=0.6, color=colors[alg],
                            left=(low + high) / 2 - 0.005 * (hi - lo), alpha=0.75)  # fmt: skip
        if title:
            height = row_height * len(algorithms)
            fig.suptitle(title, y=1.0 + 0.6 / height, fontsize="x-large")
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
