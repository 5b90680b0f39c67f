"""Each metric's 95% bootstrap interval over a result's episodes."""

from __future__ import annotations

import numpy as np

from ale_robotics.evaluator.results.intervals import metric_intervals
from ale_robotics.evaluator.results.metrics import compute
from ale_robotics.model.episode import EpisodeOutcome


def _outcomes(returns: list[float], success: list[bool] | None = None) -> list[EpisodeOutcome]:
    return [
        EpisodeOutcome(i, r, 100, False, success=None if success is None else success[i])
        for i, r in enumerate(returns)
    ]


def test_every_metric_gets_an_interval_around_its_value_the_same_every_time() -> None:
    rng = np.random.default_rng(3)
    outcomes = _outcomes(
        [float(v) for v in rng.normal(900.0, 60.0, 10)], [bool(b) for b in rng.random(10) < 0.7]
    )
    metrics = compute(outcomes, ["success_rate"])
    intervals = metric_intervals(outcomes, metrics)
    assert (
        set(intervals)
        == set(metrics)
        == {
            "mean_return",
            "std_return",
            "mean_episode_length",
            "success_rate",
        }
    )
    for name in ("mean_return", "success_rate"):
        assert intervals[name].low < metrics[name] < intervals[name].high
    assert intervals["mean_episode_length"].low == intervals["mean_episode_length"].high == 100
    assert intervals["success_rate"].low >= 0.0 and intervals["success_rate"].high <= 1.0
    assert metric_intervals(outcomes, metrics) == intervals  # seeded


def test_the_mean_returns_interval_agrees_with_an_independent_bootstrap() -> None:
    """A plain numpy percentile bootstrap of the mean (another generator, 20,000 draws):
    the two 95% intervals' ends agree within Monte Carlo error."""
    rng = np.random.default_rng(7)
    returns = rng.normal(500.0, 100.0, 20)
    ours = metric_intervals(_outcomes([float(r) for r in returns]), {"mean_return": 0.0})
    draws = np.random.default_rng(11).integers(0, 20, size=(20_000, 20))
    means = returns[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    width = high - low
    assert abs(ours["mean_return"].low - low) < 0.05 * width
    assert abs(ours["mean_return"].high - high) < 0.05 * width


def test_fewer_than_two_episodes_or_no_metric_gives_no_interval() -> None:
    one = _outcomes([10.0])
    assert metric_intervals(one, compute(one)) == {}
    two = _outcomes([10.0, 10.0])
    assert metric_intervals(two, {}) == {}
    same = metric_intervals(two, compute(two))
    assert (same["mean_return"].low, same["mean_return"].high) == (10.0, 10.0)
