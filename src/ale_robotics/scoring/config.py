"""Scoring settings a task config may carry (cap, eps, safety penalties, faithfulness gate)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ScoringConfig"]


class ScoringConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cap: float = Field(default=1.5, gt=0, description="Upper clamp of the normalized score.")
    eps: float = Field(
        default=1e-6, gt=0, description="Floor of the measured value for lower-is-better ratios."
    )
