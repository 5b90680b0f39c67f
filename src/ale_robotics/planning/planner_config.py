"""``planner.yaml``, the submission of ``panda-planner-config-v1``: a strict schema.

The agent chooses an OMPL geometric planner and its parameters; the evaluator
runs it. Nothing in the file is code or a path: it is loaded with
:func:`~ale_robotics.submission.yaml_strict.load_yaml_strict` (safe loader, size,
depth and alias limits) and then must match :class:`PlannerConfig` exactly, in
pydantic's strict mode (``"0.5"`` is not a number, ``1`` is not a boolean).
Every violation is a :class:`~ale_robotics.evaluator.batch.snapshot.SubmissionRejected`
naming the key, e.g. ``planner.yaml: key 'goal_bias': Input should be less than
or equal to 1 (rule: planner schema)``.

**The allow-list** is the geometric planners the ``ompl`` 2.0.1 Python bindings
expose and that finish a 7-DoF problem with a Python validity checker. Left out:
BiTRRT and AITstar (not bound in that release: ``ompl.geometric`` has no such
classes), PRM (deadlocks: its roadmap thread calls the Python validity checker
while ``solve`` holds the GIL) and AORRTC (crashed the interpreter when planners
were swapped in one process).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from ale_robotics.planning.settings import PlannerLimits
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.submission.yaml_strict import load_yaml_strict

__all__ = [
    "GOAL_BIAS_PLANNERS",
    "PLANNERS",
    "RANGE_PLANNERS",
    "PlannerConfig",
    "PlannerName",
    "load_planner_config",
]

PlannerName = Literal[
    "RRTConnect",
    "RRT",
    "RRTstar",
    "InformedRRTstar",
    "KPIECE1",
    "BKPIECE1",
    "LBKPIECE1",
    "PRMstar",
    "BITstar",
    "FMT",
    "BFMT",
]
PLANNERS: tuple[str, ...] = PlannerName.__args__  # type: ignore[attr-defined]
RANGE_PLANNERS = frozenset(
    {"RRTConnect", "RRT", "RRTstar", "InformedRRTstar", "KPIECE1", "BKPIECE1", "LBKPIECE1"}
)
"""Planners with ``setRange`` (the longest motion added to a tree at once)."""
GOAL_BIAS_PLANNERS = frozenset({"RRT", "RRTstar", "InformedRRTstar", "KPIECE1"})
"""Planners with ``setGoalBias`` (how often the goal is sampled)."""

FILE_NAME = "planner.yaml"
_RULE = "planner schema"


class PlannerConfig(BaseModel):
    """One planner and its parameters; omitted optional keys keep OMPL's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    planner: PlannerName = Field(description="OMPL geometric planner (see PLANNERS).")
    time_limit_s: float = Field(
        gt=0,
        le=120,
        description="Seconds per problem before the planner gives up, on the task's "
        "planning.clock (wall-clock seconds in v1, the planner process's CPU seconds from "
        "v2); at most the task's planning.planner.time_limit_cap_s.",
    )
    range: float | None = Field(
        default=None,
        gt=0,
        le=10,
        description="Radians (joint-space distance); planners in "
        "RANGE_PLANNERS only; omitted: OMPL chooses from the space's extent.",
    )
    goal_bias: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Probability of sampling the goal; planners in GOAL_BIAS_PLANNERS only.",
    )
    simplification_time_s: float = Field(
        default=0.0,
        ge=0,
        le=10,
        description="Seconds of path shortcutting after a solution is found (on the task's "
        "planning.clock).",
    )
    parallel_processes: int = Field(
        default=1,
        ge=1,
        le=2,
        description="Planner processes racing on each problem (different "
        "random streams); the first exact solution wins and the other is cancelled.",
    )
    collision_check_resolution: float = Field(
        default=0.01,
        ge=0.001,
        le=0.05,
        description="OMPL's state validity checking "
        "resolution, a fraction of the joint space's extent: the planner's own motion checks. "
        "The evaluator validates the returned path independently, at its own resolution.",
    )

    @model_validator(mode="after")
    def _applies(self) -> PlannerConfig:
        if self.range is not None and self.planner not in RANGE_PLANNERS:
            raise ValueError(f"range: planner {self.planner} has no range parameter")
        if self.goal_bias is not None and self.planner not in GOAL_BIAS_PLANNERS:
            raise ValueError(f"goal_bias: planner {self.planner} has no goal bias parameter")
        return self


def _key_and_message(err: ErrorDetails) -> tuple[str, str]:
    loc = [str(x) for x in err["loc"]]
    msg = err["msg"]
    if not loc and ":" in msg:  # model-level rules start with the key they are about
        key, _, rest = msg.removeprefix("Value error, ").partition(": ")
        return key, rest
    return ".".join(loc) or "(document)", msg


def load_planner_config(
    path: Path, shown: str, max_bytes: int, limits: PlannerLimits
) -> PlannerConfig:
    """Parse and validate ``planner.yaml``; raises ``SubmissionRejected`` naming the key."""
    doc = load_yaml_strict(path, shown, max_bytes)
    if not isinstance(doc, dict):
        raise SubmissionRejected(
            shown, _RULE, f"must be a YAML mapping of keys to values, not {type(doc).__name__}"
        )
    try:
        cfg = PlannerConfig.model_validate(doc)
    except ValidationError as exc:
        key, msg = _key_and_message(exc.errors()[0])
        raise SubmissionRejected(shown, _RULE, f"key {key[:80]!r}: {msg}") from None
    if cfg.time_limit_s > limits.time_limit_cap_s:
        raise SubmissionRejected(
            shown,
            _RULE,
            f"key 'time_limit_s': {cfg.time_limit_s:g} is over this task's cap of "
            f"{limits.time_limit_cap_s:g} s",
        )
    return cfg
