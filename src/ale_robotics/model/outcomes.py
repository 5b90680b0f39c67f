"""A batch job's per-episode outcomes, one typed record per kind of measurement.

Split from :mod:`.result` (whose :class:`~.result.EvalResult` holds them in ``outcomes``):
the records the rollout kinds build (:meth:`~.rollout_kind.RolloutKind.outcome_record`)
and the audit re-checks, apart from the result's own fields.

One record per kind of measurement, each holding what a rollout kind measures per episode
and enough to recompute every task metric from it alone (so the audit can check the
signed outcomes against the signed metrics). Which record a job gets is its kind's choice
(RolloutKind.outcome_record); the stored JSON names the kind in ``backend`` (the key
results and signed events have always had), which is also what picks the model when a
result is read back. ``host_dependent`` names the fields a re-run on another host (an
audit) reproduces only approximately: wall-clock times and what follows from a path found
within a time limit. They are re-measured and shown, never compared; every other field
must match exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
)

from ale_robotics.model.control_loop import ControlLoop
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind, kind_names

if TYPE_CHECKING:
    from ale_robotics.model.rollout_kind import RolloutKind

__all__ = [
    "BatchOutcomes",
    "ControlLoopEpisodeOutcome",
    "ControlLoopOutcomes",
    "PlanningOutcomes",
    "PlanningProblemOutcome",
    "ReplayInstanceOutcome",
    "ReplayOutcomes",
    "RolloutEpisodeOutcome",
    "RolloutOutcomes",
    "batch_outcomes",
    "episode_outcomes",
    "outcome_entries",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolloutEpisodeOutcome(_Model):
    """A policy rollout (kinds ``gymnasium``, ``mujoco_rollout`` and any other policy kind)."""

    host_dependent: ClassVar[frozenset[str]] = frozenset()

    index: int = Field(description="Position in the task's base-seed list.")
    episode_return: float = Field(description="Undiscounted return of the episode.")
    length: int = Field(description="Steps simulated.")
    terminated: bool = Field(description="True if the env terminated (vs truncated by time).")
    success: bool | None = Field(
        default=None, description="info['success'] at the last step where the env reports it."
    )


class PlanningProblemOutcome(_Model):
    """One hidden-seed planning problem (kinds ``planner`` and ``edmp``)."""

    host_dependent: ClassVar[frozenset[str]] = frozenset(
        {"planning_time_s", "planning_wall_time_s", "states_checked", "reason"}
    )

    index: int = Field(description="Position in the task's base-seed list.")
    success: bool = Field(description="The path passed dense validation and reached the goal.")
    collided: bool = Field(description="The returned path hit something (self or scene).")
    planning_time_s: float = Field(
        description="Seconds the planner took on this problem, measured by the evaluator on "
        "the task's planning.clock: wall-clock seconds (v1 tasks) or the planning "
        "process's CPU seconds (host-dependent either way)."
    )
    planning_wall_time_s: float | None = Field(
        default=None,
        description="Tasks timed in CPU seconds: the wall-clock seconds beside them "
        "(host- and load-dependent); absent otherwise.",
    )
    states_checked: int = Field(description="Configurations the validator checked.")
    reason: str = Field(description="Why the path failed validation ('' on success).")


class ReplayInstanceOutcome(_Model):
    """One replayed published instance (kind ``replay``)."""

    host_dependent: ClassVar[frozenset[str]] = frozenset()

    index: int = Field(description="Position of the instance in the task's base_seeds.")
    instance: int = Field(description="The published instance (the env's reset seed).")
    success: bool = Field(description="info['is_success'] after the last action.")
    final_distance: float = Field(description="Achieved-to-desired goal distance at the end.")
    episode_return: float = Field(description="Undiscounted return of the replay.")
    length: int = Field(description="Steps replayed.")
    terminated: bool = Field(description="True if the env terminated (vs truncated by time).")


class ControlLoopEpisodeOutcome(_Model):
    """A policy run as a real-time controller (kind ``ros``): the rollout's fields, and the
    control loop's (:class:`~.control_loop.ControlLoop`), unset for an outcome without one.
    The hold schedule is exact (a re-run imposes it, :mod:`.control_loop`); the timing is the
    host's."""

    host_dependent: ClassVar[frozenset[str]] = frozenset(
        {
            "late_commands",
            "missing_commands",
            "latency_p50_us",
            "latency_p99_us",
            "latency_max_us",
            "max_tick_lag_us",
            "graph_start_s",
        }
    )

    index: int = Field(description="Position in the task's base-seed list.")
    episode_return: float = Field(description="Undiscounted return of the episode.")
    length: int = Field(description="Control steps simulated.")
    terminated: bool = Field(description="True if the env terminated (vs truncated by time).")
    holds: list[tuple[int, int, int]] | None = Field(
        default=None,
        description="The hold schedule: [first step, steps, command sequence] runs of steps "
        "that applied an earlier step's command (-1: the null command); [] when every "
        "command was on time.",
    )
    held_steps: int | None = Field(default=None, description="Steps the runs cover.")
    late_commands: int | None = Field(
        default=None, description="Commands that came after the tick that should apply them."
    )
    missing_commands: int | None = Field(default=None, description="Commands that never came.")
    latency_p50_us: float | None = Field(
        default=None, description="Median observation-to-command latency (microseconds)."
    )
    latency_p99_us: float | None = Field(default=None, description="Its 99th percentile.")
    latency_max_us: float | None = Field(default=None, description="Its maximum.")
    max_tick_lag_us: float | None = Field(
        default=None, description="Most a control tick started after its time (microseconds)."
    )
    graph_start_s: float | None = Field(
        default=None, description="Seconds from starting the graph to its first control tick."
    )

    @classmethod
    def of(cls, o: EpisodeOutcome) -> ControlLoopEpisodeOutcome:
        c = o.control
        loop: dict[str, Any] = {}
        if c is not None:
            loop = {
                "holds": [list(run) for run in c.holds],
                "held_steps": c.held_steps,
                "late_commands": c.late,
                "missing_commands": c.missing,
                "latency_p50_us": c.latency_p50_us,
                "latency_p99_us": c.latency_p99_us,
                "latency_max_us": c.latency_max_us,
                "max_tick_lag_us": c.max_tick_lag_us,
                "graph_start_s": c.graph_start_s,
            }
        return cls.model_validate(
            {
                "index": o.index,
                "episode_return": o.ret,
                "length": o.length,
                "terminated": o.terminated,
                **loop,
            }
        )

    def control(self) -> ControlLoop | None:
        if self.holds is None or self.max_tick_lag_us is None or self.graph_start_s is None:
            return None
        return ControlLoop(
            holds=tuple((a, b, c) for a, b, c in self.holds),
            late=self.late_commands or 0,
            missing=self.missing_commands or 0,
            latency_p50_us=self.latency_p50_us,
            latency_p99_us=self.latency_p99_us,
            latency_max_us=self.latency_max_us,
            max_tick_lag_us=self.max_tick_lag_us,
            graph_start_s=self.graph_start_s,
        )


_Entry = (
    RolloutEpisodeOutcome
    | PlanningProblemOutcome
    | ReplayInstanceOutcome
    | ControlLoopEpisodeOutcome
)


class PlanningOutcomes(_Model):
    backend: Literal["planner", "edmp"]
    problems: list[PlanningProblemOutcome]

    @classmethod
    def from_episodes(cls, backend: str, outcomes: Sequence[EpisodeOutcome]) -> PlanningOutcomes:
        """From what a planning kind's shards produced (same order)."""
        return cls.model_validate(
            {
                "backend": backend,
                "problems": [
                    PlanningProblemOutcome(
                        index=o.index,
                        success=_required(o.success, "success", o.index),
                        collided=_required(o.collided, "collided", o.index),
                        planning_time_s=_required(o.planning_time_s, "planning_time_s", o.index),
                        planning_wall_time_s=o.planning_wall_time_s,
                        states_checked=o.length,
                        reason=o.reason or "",
                    )
                    for o in outcomes
                ],
            }
        )

    def entries(self) -> list[_Entry]:
        return list(self.problems)

    def episode_outcomes(self) -> list[EpisodeOutcome]:
        return [
            EpisodeOutcome(
                p.index,
                1.0 if p.success else 0.0,
                p.states_checked,
                p.success,
                success=p.success,
                collided=p.collided,
                planning_time_s=p.planning_time_s,
                planning_wall_time_s=p.planning_wall_time_s,
                reason=p.reason,
            )
            for p in self.problems
        ]


class ReplayOutcomes(_Model):
    backend: Literal["replay"]
    instances: list[ReplayInstanceOutcome]

    @classmethod
    def from_episodes(
        cls, backend: str, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> ReplayOutcomes:
        """From what the replay kind's shards produced (same order); ``base_seeds`` are the
        task's published instances (never a hidden seed value, which no result holds)."""
        return cls.model_validate(
            {
                "backend": backend,
                "instances": [
                    ReplayInstanceOutcome(
                        index=o.index,
                        instance=int(base_seeds[o.index]),
                        success=_required(o.success, "success", o.index),
                        final_distance=_required(o.final_distance, "final_distance", o.index),
                        episode_return=o.ret,
                        length=o.length,
                        terminated=o.terminated,
                    )
                    for o in outcomes
                ],
            }
        )

    def entries(self) -> list[_Entry]:
        return list(self.instances)

    def episode_outcomes(self) -> list[EpisodeOutcome]:
        return [
            EpisodeOutcome(
                r.index,
                r.episode_return,
                r.length,
                r.terminated,
                success=r.success,
                final_distance=r.final_distance,
            )
            for r in self.instances
        ]


class ControlLoopOutcomes(_Model):
    backend: Literal["ros"]
    episodes: list[ControlLoopEpisodeOutcome]

    @classmethod
    def from_episodes(cls, backend: str, outcomes: Sequence[EpisodeOutcome]) -> ControlLoopOutcomes:
        """From what a controller kind's shards produced (same order)."""
        return cls.model_validate(
            {"backend": backend, "episodes": [ControlLoopEpisodeOutcome.of(o) for o in outcomes]}
        )

    def entries(self) -> list[_Entry]:
        return list(self.episodes)

    def episode_outcomes(self) -> list[EpisodeOutcome]:
        return [
            EpisodeOutcome(e.index, e.episode_return, e.length, e.terminated, control=e.control())
            for e in self.episodes
        ]


_OTHER_RECORDS: dict[str, str] = {
    **{name: "planning" for name in get_args(PlanningOutcomes.model_fields["backend"].annotation)},
    **{name: "replay" for name in get_args(ReplayOutcomes.model_fields["backend"].annotation)},
    **{
        name: "control_loop"
        for name in get_args(ControlLoopOutcomes.model_fields["backend"].annotation)
    },
}
"""Kind names whose outcomes are not rollout episodes -> the tag of their record."""


class RolloutOutcomes(_Model):
    backend: str = Field(
        description="The rollout kind: any registered kind that rolls out a policy "
        "('gymnasium', 'mujoco_rollout', a third party's)."
    )
    episodes: list[RolloutEpisodeOutcome]

    @field_validator("backend")
    @classmethod
    def _a_policy_kind(cls, name: str) -> str:
        """Open to kinds registered later (a new policy kind needs no edit here), closed to
        the names whose outcomes have their own record, and to names no kind has."""
        if name in _OTHER_RECORDS:
            raise ValueError(f"the outcomes of kind {name!r} are {_OTHER_RECORDS[name]} records")
        if name not in kind_names():
            registered = ", ".join(kind_names())
            raise ValueError(
                f"{name!r} is not a registered rollout kind (registered: {registered})"
            )
        return name

    @classmethod
    def from_episodes(cls, backend: str, outcomes: Sequence[EpisodeOutcome]) -> RolloutOutcomes:
        """From what a policy kind's shards produced (same order)."""
        return cls.model_validate(
            {
                "backend": backend,
                "episodes": [
                    RolloutEpisodeOutcome(
                        index=o.index,
                        episode_return=o.ret,
                        length=o.length,
                        terminated=o.terminated,
                        success=o.success,
                    )
                    for o in outcomes
                ],
            }
        )

    def entries(self) -> list[_Entry]:
        return list(self.episodes)

    def episode_outcomes(self) -> list[EpisodeOutcome]:
        return [
            EpisodeOutcome(e.index, e.episode_return, e.length, e.terminated, success=e.success)
            for e in self.episodes
        ]


def _record_tag(value: Any) -> str | None:
    """Which record a stored ``outcomes`` object is, from the kind it names."""
    backend = value.get("backend") if isinstance(value, dict) else getattr(value, "backend", None)
    if not isinstance(backend, str):
        return None
    return _OTHER_RECORDS.get(backend, "rollout")


BatchOutcomes = Annotated[
    Annotated[RolloutOutcomes, Tag("rollout")]
    | Annotated[PlanningOutcomes, Tag("planning")]
    | Annotated[ReplayOutcomes, Tag("replay")]
    | Annotated[ControlLoopOutcomes, Tag("control_loop")],
    Discriminator(
        _record_tag,
        custom_error_type="outcomes_backend",
        custom_error_message="outcomes need a 'backend' naming their rollout kind",
    ),
]
"""A batch job's per-episode outcomes, typed by the task's rollout kind (``eval.backend``)."""


def outcome_entries(outcomes: BatchOutcomes) -> list[_Entry]:
    """The per-episode entries, whatever the kind."""
    return outcomes.entries()


def batch_outcomes(
    kind: str | RolloutKind, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
) -> BatchOutcomes:
    """The typed outcomes of a batch job from what its kind produced (same order): the
    kind's own record (:meth:`~ale_robotics.model.rollout_kind.RolloutKind.outcome_record`).

    ``kind`` is the task's kind or its name (``task.eval.rollout``); ``base_seeds`` are
    the task's public base seeds: a replay task's instances (never a hidden seed value,
    which no result holds).
    """
    return (get_kind(kind) if isinstance(kind, str) else kind).outcome_record(base_seeds, outcomes)


def episode_outcomes(outcomes: BatchOutcomes) -> list[EpisodeOutcome]:
    """Back to the pipeline's outcomes, from which :func:`.metrics.compute` gives the metrics
    (bit for bit the evaluator's: the same values in the same order)."""
    return outcomes.episode_outcomes()


def _required(value: Any, name: str, index: int) -> Any:
    if value is None:
        raise ValueError(f"episode {index}: the backend reported no {name}")
    return value
