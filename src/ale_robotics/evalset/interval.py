"""The interval estimate every eval-set statistic is reported as (:class:`Interval`).

Apart from :mod:`.aggregate` so that :mod:`.cost` (the agents' model tokens, with the
same kind of interval) and the aggregate share it without importing each other.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Interval"]


class Interval(BaseModel):
    """A point estimate and its bootstrap interval (``low`` <= ``value`` <= ``high``
    for the metrics here, up to resampling noise on degenerate data)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    low: float
    high: float
