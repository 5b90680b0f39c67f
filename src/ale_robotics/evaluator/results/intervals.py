"""Each metric's confidence interval over a result's episodes (issue 27).

One policy evaluated on 10 hidden-seed episodes is a sample: another 10 seeds would give
another mean. The interval says how far: the 95% percentile bootstrap of the metrics,
the episodes resampled with replacement (SciPy's ``bootstrap``; its statistic is every
metric at once, computed by :func:`.metrics.compute` exactly as the result's own are).
Seeded, so that the same episodes always give the same interval (an audit's re-run
reproduces it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from scipy.stats import bootstrap

from ale_robotics.evaluator.results.metrics import compute
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.result import MetricInterval

__all__ = ["CONFIDENCE", "RESAMPLES", "SEED", "metric_intervals"]

CONFIDENCE = 0.95
RESAMPLES = 1999
SEED = 0


def metric_intervals(
    outcomes: Sequence[EpisodeOutcome], metrics: Mapping[str, float]
) -> dict[str, MetricInterval]:
    """The interval of each of ``metrics`` over ``outcomes`` (module docstring); empty for
    fewer than 2 episodes. A metric a resample cannot compute gets no interval."""
    if len(outcomes) < 2 or not metrics:
        return {}
    names = list(metrics)

    def statistic(idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        values = compute([outcomes[int(k)] for k in idx], names)
        return np.array([values.get(n, math.nan) for n in names], dtype=np.float64)

    with warnings.catch_warnings():  # equal values everywhere: a zero-width interval
        warnings.simplefilter("ignore")
        res = bootstrap(
            (np.arange(len(outcomes)),),
            statistic,
            vectorized=False,
            n_resamples=RESAMPLES,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=np.random.default_rng(SEED),
        )
    low = np.atleast_1d(res.confidence_interval.low)
    high = np.atleast_1d(res.confidence_interval.high)
    return {
        name: MetricInterval(low=float(lo), high=float(hi))
        for name, lo, hi in zip(names, low, high, strict=True)
        if math.isfinite(lo) and math.isfinite(hi)
    }
