"""``edmp-v1``'s agent-settable planner settings: the schema, the allow-list, the merge.

The task config holds the defaults (``planning.edmp.defaults``, a full
:class:`EdmpConfig`) and the allow-list (``planning.edmp.agent_settable``, field
names). The agent's copy, ``edmp_config.yaml``, may hold any subset of the
fields; each key must be a field of :class:`EdmpConfig` and either be on the
allow-list or keep the task's value, and the merged result must pass the schema
(strict types, ranges) and the task's compute cap. Anything else is a
rejection naming the key.

Declarative only: imported by the task spec through
:mod:`ale_robotics.planning.settings`, so it must not import the evaluator at
module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ale_robotics.submission.rejected import SubmissionRejected

__all__ = [
    "COST_TERMS",
    "EdmpConfig",
    "EdmpTaskSettings",
    "Guide",
    "GuideWeights",
    "load_edmp_config",
]

COST_TERMS = ("collision", "swept_volume", "joint_limits", "smoothness", "goal")
FILE_NAME = "edmp_config.yaml"
_RULE = "edmp allow-list"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class GuideWeights(_Strict):
    """Weights of the cost terms one guide descends (see :mod:`ale_robotics.planning.edmp`)."""

    collision: float = Field(default=0.0, ge=0, le=1000)
    swept_volume: float = Field(default=0.0, ge=0, le=1000)
    joint_limits: float = Field(default=0.0, ge=0, le=1000)
    smoothness: float = Field(default=0.0, ge=0, le=1000)
    goal: float = Field(default=0.0, ge=0, le=1000)


class Guide(_Strict):
    name: str = Field(min_length=1, max_length=32, pattern=r"^[a-z0-9_-]+$")
    weights: GuideWeights


class EdmpConfig(_Strict):
    """One run of the ensemble-of-costs generator (every field has a range the evaluator
    can run safely; the product of the sizes is capped by the task)."""

    guides: list[Guide] = Field(min_length=1, max_length=8, description="The ensemble.")
    samples_per_guide: int = Field(ge=1, le=64, description="Candidate trajectories per guide.")
    steps: int = Field(ge=1, le=400, description="Guided refinement iterations.")
    trajectory_length: int = Field(ge=8, le=128, description="Waypoints, start and goal included.")
    step_size: float = Field(gt=0, le=1, description="Gradient step (radians per unit cost).")
    prior_noise: float = Field(
        ge=0, le=1.5, description="Amplitude (rad) of the smooth noise added to the straight line."
    )
    collision_margin: float = Field(
        ge=0, le=0.1, description="Metres added to the sphere radii by the collision cost."
    )
    retract_distance: float = Field(
        default=0.0,
        ge=0,
        le=0.3,
        description="Metres the prior backs the gripper out along its "
        "approach axis after the start and before the goal; 0: a straight joint-space line.",
    )
    anneal: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Langevin noise at the first step, as a fraction "
        "of step_size; it decays linearly to 0 at the last step.",
    )

    @field_validator("guides")
    @classmethod
    def _distinct(cls, v: list[Guide]) -> list[Guide]:
        names = [g.name for g in v]
        if len(set(names)) != len(names):
            raise ValueError("guide names must be distinct")
        return v

    @property
    def work(self) -> int:
        """Waypoint updates per problem: what the compute cap bounds."""
        return len(self.guides) * self.samples_per_guide * self.steps * self.trajectory_length


class EdmpTaskSettings(BaseModel):
    """The ``planning.edmp`` block of ``edmp-v1``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    defaults: EdmpConfig
    agent_settable: list[str] = Field(description="Fields of EdmpConfig the agent may change.")
    max_work: int = Field(
        gt=0, description="Cap on guides x samples_per_guide x steps x trajectory_length."
    )

    @model_validator(mode="after")
    def _known(self) -> EdmpTaskSettings:
        unknown = sorted(set(self.agent_settable) - set(EdmpConfig.model_fields))
        if unknown:
            raise ValueError(f"agent_settable names unknown fields {unknown}")
        if self.defaults.work > self.max_work:
            raise ValueError("the defaults exceed max_work")
        return self


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(x) for x in err.get("loc", ())) or "(document)"
    return f"key {loc[:80]!r}: {err.get('msg', 'invalid')}"


def load_edmp_config(path: Path, shown: str, max_bytes: int, task: EdmpTaskSettings) -> EdmpConfig:
    """The task's defaults updated by the agent's file; raises ``SubmissionRejected``."""
    # Here, not at the top: this module is part of the task model every agent's SDK
    # imports, and only the evaluator's validation of an edmp submission reads YAML.
    from ale_robotics.submission.yaml_strict import load_yaml_strict

    doc = load_yaml_strict(path, shown, max_bytes)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SubmissionRejected(
            shown, _RULE, f"must be a YAML mapping of keys to values, not {type(doc).__name__}"
        )
    base = task.defaults.model_dump(mode="python")
    settable = sorted(task.agent_settable)
    for key, value in doc.items():
        if key not in EdmpConfig.model_fields:
            raise SubmissionRejected(
                shown, _RULE, f"key {str(key)[:80]!r} is not a setting; agent-settable: {settable}"
            )
        if key not in task.agent_settable and value != base[key]:
            raise SubmissionRejected(
                shown,
                _RULE,
                f"key {key!r} is not agent-settable in this task (it must keep its value "
                f"{base[key]!r}); agent-settable: {settable}",
            )
    try:
        cfg = EdmpConfig.model_validate({**base, **doc})
    except ValidationError as exc:
        raise SubmissionRejected(shown, "edmp schema", _describe(dict(exc.errors()[0]))) from None
    if cfg.work > task.max_work:
        raise SubmissionRejected(
            shown,
            "edmp compute cap",
            f"guides x samples_per_guide x steps x trajectory_length = {cfg.work}; this task "
            f"allows at most {task.max_work}",
        )
    return cfg
