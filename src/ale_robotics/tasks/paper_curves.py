"""Published learning curves of the papers, shipped as package data (numbers only).

A reproduction's evaluator-measured learning curve is drawn against the
authors' own curve where they published one (``learning_curve.png``). The data
files live in ``tasks/data/`` with their source (repository, commit, path) and
how the numbers were derived; this module reads and checks them.
"""

from __future__ import annotations

import math
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["PAPER_CURVE_FILES", "CurveSource", "PaperCurve", "paper_curve"]

PAPER_CURVE_FILES: dict[str, str] = {
    "td3-walker2d-repro-v1": "td3_learning_curve_walker2d.json",
    "td3-walker2d-repro-v2": "td3_learning_curve_walker2d.json",
    "td3-walker2d-repro-v3": "td3_learning_curve_walker2d.json",
}
"""Task id -> its paper's curve file in ``tasks/data/``; tasks not listed have none."""


class CurveSource(BaseModel):
    """Where a published curve's numbers come from."""

    model_config = ConfigDict(extra="allow", frozen=True)

    repository: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    path: str


class PaperCurve(BaseModel):
    """A paper's mean learning curve over its seeds, with the std band over seeds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    description: str
    source: CurveSource
    seeds: int = Field(gt=0)
    steps: list[int] = Field(min_length=1, description="Environment steps of each evaluation.")
    mean_return: list[float] = Field(description="Mean return over the seeds at each step.")
    std_return: list[float] = Field(description="Std of the return over the seeds at each step.")

    @model_validator(mode="after")
    def _aligned(self) -> PaperCurve:
        n = len(self.steps)
        if len(self.mean_return) != n or len(self.std_return) != n:
            raise ValueError("steps, mean_return and std_return must have one entry per step")
        if any(b <= a for a, b in zip(self.steps, self.steps[1:], strict=False)):
            raise ValueError("steps must increase")
        if any(s < 0 or not math.isfinite(s) for s in self.std_return):
            raise ValueError("std_return must be finite and non-negative")
        return self

    @property
    def label(self) -> str:
        """'sfujim/TD3 @ 34770cc, 10 seeds' for a legend."""
        repo = self.source.repository.rstrip("/").removeprefix("https://github.com/")
        return f"{repo} @ {self.source.commit[:7]}, {self.seeds} seeds"


def paper_curve(task_id: str) -> PaperCurve | None:
    """The published learning curve drawn for ``task_id``; None when there is none."""
    name = PAPER_CURVE_FILES.get(task_id)
    if name is None:
        return None
    text = resources.files("ale_robotics.tasks").joinpath("data", name).read_text("utf-8")
    return PaperCurve.model_validate_json(text)
