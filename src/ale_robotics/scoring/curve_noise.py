"""Did an evaluator-measured learning curve improve by more than its episodes' noise?

The learning-curve check of the faithfulness gate (:mod:`ale_robotics.scoring.gate`)
wants evidence that the run *trained*, not only that it committed checkpoints: a
policy brought in finished and committed unchanged at every checkpoint draws a flat
curve, however good it is. Each point of the curve is the mean return of one
checkpoint over the task's checkpoint episodes (the same hidden seeds for every
checkpoint of a run), together with the population standard deviation of those
returns and their number, as the evaluator measured and signed them.

The noise estimate is the per-episode spread pooled over every point of the curve:
each point's sample variance (``std**2 * n / (n - 1)``) weighted by its degrees of
freedom ``n - 1``. Pooling gives a steadier estimate than any one point's two or
three episodes (three checkpoints of three episodes give 6 degrees of freedom). The
improvement is the best point after the first minus the first, and it must exceed
``k`` standard errors of that difference, ``s_pooled * sqrt(1/n_first + 1/n_best)``.
With 6 degrees of freedom, Student's t puts the one-sided 95% level at 1.94, so
``k = 2`` rejects a curve whose rise is as likely to be noise as training.

This module is pure arithmetic over numbers (it imports nothing of ours); the gate
turns its :class:`CurveNoiseError` into a failed check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CurveNoiseError", "Improvement", "MeasuredPoint", "PooledSpread", "improvement"]


class CurveNoiseError(ValueError):
    """The curve's numbers cannot support an estimate; the message says why."""


@dataclass(frozen=True)
class MeasuredPoint:
    """One checkpoint as the evaluator measured it."""

    mean_return: float
    std_return: float
    """Population standard deviation (numpy's ``std``) of the checkpoint's episode returns."""
    episodes: int


@dataclass(frozen=True)
class PooledSpread:
    """The per-episode standard deviation pooled over a curve's points."""

    std: float
    dof: int
    """Degrees of freedom: the sum of ``episodes - 1`` over the points."""


@dataclass(frozen=True)
class Improvement:
    """The best point after the first against the first, in standard errors of the gap."""

    first: int
    """Index of the first point (the baseline)."""
    best: int
    """Index of the best point after it."""
    gain: float
    """``mean_return`` of the best point minus that of the first."""
    standard_error: float
    k: float
    spread: PooledSpread

    @property
    def margin(self) -> float:
        """The gain the curve must exceed: ``k`` standard errors."""
        return self.k * self.standard_error

    @property
    def passed(self) -> bool:
        """True when the gain exceeds the margin (strictly: a flat curve never passes)."""
        return self.gain > self.margin


def pooled_spread(points: Sequence[MeasuredPoint]) -> PooledSpread:
    """The per-episode sample standard deviation pooled over ``points``.

    Points of one episode carry no spread and add no degree of freedom;
    CurveNoiseError when no point has two episodes, or a number is not finite.
    """
    squares = 0.0
    dof = 0
    for i, p in enumerate(points):
        _check(i, p)
        if p.episodes >= 2:  # sum of squared deviations: n * population variance
            squares += p.episodes * p.std_return**2
            dof += p.episodes - 1
    if dof == 0:
        raise CurveNoiseError(
            "no checkpoint has two or more episodes, so the episodes' noise cannot be estimated"
        )
    return PooledSpread(std=math.sqrt(squares / dof), dof=dof)


def improvement(points: Sequence[MeasuredPoint], k: float) -> Improvement:
    """How far the best point after the first rises above the first, against the noise.

    CurveNoiseError for fewer than two points, a point of no episode, a number that
    is not finite, or a negative or non-finite ``k``.
    """
    if not (math.isfinite(k) and k >= 0):
        raise CurveNoiseError(f"k must be a finite number >= 0, got {k!r}")
    if len(points) < 2:
        raise CurveNoiseError(f"{len(points)} checkpoints: an improvement needs two or more")
    spread = pooled_spread(points)
    best = max(range(1, len(points)), key=lambda i: (points[i].mean_return, -i))
    first, top = points[0], points[best]
    se = spread.std * math.sqrt(1 / first.episodes + 1 / top.episodes)
    return Improvement(
        first=0,
        best=best,
        gain=top.mean_return - first.mean_return,
        standard_error=se,
        k=k,
        spread=spread,
    )


def _check(i: int, p: MeasuredPoint) -> None:
    if p.episodes < 1:
        raise CurveNoiseError(f"checkpoint {i} has {p.episodes} episodes")
    if not (math.isfinite(p.mean_return) and math.isfinite(p.std_return)):
        raise CurveNoiseError(
            f"checkpoint {i} has a non-finite return (mean {p.mean_return}, std {p.std_return})"
        )
    if p.std_return < 0:
        raise CurveNoiseError(f"checkpoint {i} has a negative std {p.std_return}")
