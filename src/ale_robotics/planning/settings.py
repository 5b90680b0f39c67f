"""The ``planning`` block of a planning task's config: scenes, validation, planner limits.

Declarative data only, like :mod:`ale_robotics.tasks.scoring_config`: the task spec
imports this module, so it must not import :mod:`ale_robotics.tasks` nor load
PyBullet or OMPL.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ale_robotics.planning.cpu_clock import Clock
from ale_robotics.planning.edmp_config import EdmpTaskSettings

__all__ = ["SCENE_TYPES", "PlannerLimits", "PlanningSettings", "SceneType"]

SceneType = Literal["tabletop", "cubby", "merged_cubby", "dresser"]
SCENE_TYPES: tuple[SceneType, ...] = ("tabletop", "cubby", "merged_cubby", "dresser")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class PlannerLimits(_Strict):
    """What the evaluator allows a submitted planner configuration (``planner`` backend)."""

    time_limit_cap_s: float = Field(
        gt=0, le=120, description="Largest accepted time_limit_s of planner.yaml."
    )
    grace_s: float = Field(
        default=2.0,
        gt=0,
        le=30,
        description="How long past its time limit a planner process may take to answer before "
        "it is killed (and the problem counts as unsolved), in seconds on planning.clock.",
    )


class PlanningSettings(_Strict):
    """Scenes and the evaluator's path validation, shared by both planning backends."""

    scene_types: list[SceneType] = Field(
        min_length=1, description="Scene families; each problem's family is drawn by its seed."
    )
    validation_resolution_rad: float = Field(
        default=0.01,
        gt=0,
        le=0.1,
        description="Largest joint move between two configurations the validation checks.",
    )
    goal_tolerance_rad: float = Field(
        default=0.01, gt=0, le=0.1, description="Per joint, for the first and last waypoint."
    )
    max_validated_states: int = Field(
        default=50_000, gt=0, description="A path needing more checks than this fails."
    )
    clock: Clock = Field(
        default="wall",
        description="What planning_time measures and the planner's time limit counts: 'wall', "
        "wall-clock seconds (the v1 tasks, kept for their recorded runs: on a loaded host "
        "a planner gets less done per second, so success moved with the load); 'cpu', "
        "the CPU seconds of the planning process(es) (issue 27), with the wall-clock "
        "seconds reported beside it as planning_wall_time and results carrying only the "
        "task's declared metrics.",
    )
    planner: PlannerLimits | None = Field(default=None, description="'planner' backend only.")
    edmp: EdmpTaskSettings | None = Field(default=None, description="'edmp' backend only.")

    @field_validator("scene_types")
    @classmethod
    def _distinct(cls, v: list[SceneType]) -> list[SceneType]:
        if len(set(v)) != len(v):
            raise ValueError("scene_types must be distinct")
        return v
