"""The official ``EvalResult``: what the evaluator measured, stored per job, read by the harness.

It is JSON on the wire (``GetEvalResultResponse.eval_result_json``) and on disk,
validated by this versioned schema at both ends. It never holds a raw seed: each
episode carries the commitment to its seed, and the secret is represented by
its SHA-256.

It carries no version of its own: the documents that hold it do. On the wire that is the
protocol's version (``GetSpec``), in the job store the store's schema (its one migration
list), in ``result.json`` the report's ``schema_version``. A read-on-harness-channel
result (:attr:`EvalResult.read_on_harness_channel`) is :attr:`EvalResult.official` only
for the task's full protocol, never a smoke run.
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

from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind, kind_names
from ale_robotics.model.states import FailureSource, JobState

if TYPE_CHECKING:
    from ale_robotics.model.rollout_kind import RolloutKind

__all__ = [
    "BatchOutcomes",
    "CurvePoint",
    "EpisodeRecord",
    "EvalResult",
    "FailedCheckpoint",
    "HostInfo",
    "PlanningOutcomes",
    "PlanningProblemOutcome",
    "ReplayInstanceOutcome",
    "ReplayOutcomes",
    "RolloutEpisodeOutcome",
    "RolloutOutcomes",
    "SmokeRun",
    "Timings",
    "TrainingUsage",
    "batch_outcomes",
    "episode_outcomes",
    "outcome_entries",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeRecord(_Model):
    index: int = Field(description="Position in the task's base-seed list.")
    seed_commitment: str = Field(description="SHA256 commitment to the hidden seed, hex.")
    episode_return: float = Field(description="Undiscounted return of the episode.")
    length: int = Field(description="Steps simulated.")
    terminated: bool = Field(description="True if the env terminated (vs truncated by time).")
    abandoned: bool = Field(
        default=False,
        description="Interactive eval sessions: the agent did not finish the episode (a Reset "
        "cut it short, or the session ended: CloseSession, an idle-timeout reap, the agent's "
        "exit), or never started it. The evaluator then played it to its end with the task's "
        "null action, from the state the agent left it in (from its hidden-seed reset when "
        "never started), so stopping early scores exactly what playing the null action does.",
    )
    success: bool | None = Field(
        default=None,
        description="Tasks whose env reports info['success']: its value at the episode's last "
        "step (for an abandoned episode, the last null-action step); None for other tasks.",
    )
    agent_steps: int | None = Field(
        default=None,
        description="Interactive eval sessions: steps the agent took in the episode; the rest "
        "of its length (length - agent_steps) were the evaluator's null actions. None for "
        "batch results, whose every step is the submitted policy's.",
    )


class SmokeRun(_Model):
    """An operator's smoke run (``ale-robotics run --episodes N``): not an official result."""

    episodes: int = Field(description="Episodes evaluated: the first N of the task's base seeds.")
    of: int = Field(description="Episodes the task's official evaluation runs.")


class Timings(_Model):
    wall_s: float = Field(description="Seconds spent in the rollout pipeline.")
    env_steps: int = Field(description="Environment steps simulated for this result.")
    env_steps_per_s: float = Field(description="env_steps / wall_s on this host.")
    workers: int = Field(description="Worker processes used.")


class TrainingUsage(_Model):
    """A run's practice-session steps as the evaluator counted them (interactive tasks, and
    batch tasks whose simulator is the evaluator's: ``training.simulator`` 'evaluator')."""

    agent_steps: int = Field(
        description="Agent steps (Step calls x envs) over every practice session of the run "
        "when the eval session ended."
    )
    agent_steps_budget: int | None = Field(
        default=None,
        description="The most the run could take: compute_budget.training_steps as agent "
        "steps; None when the task has no training budget.",
    )
    budget_steps: int | None = Field(
        default=None, description="compute_budget.training_steps, in its own unit."
    )
    unit: str | None = Field(
        default=None, description="The unit of budget_steps: 'agent_step' or 'simulator_step'."
    )
    enforced: bool = Field(
        default=False, description="True when practice Steps past the budget were refused."
    )
    budget: str | None = Field(default=None, description="The budget in words.")

    def summary(self) -> str:
        """'trained 48,000 / 50,000 agent steps' (or '... agent steps, no budget')."""
        if self.agent_steps_budget is None:
            return f"trained {self.agent_steps:,} agent steps (no training budget)"
        return f"trained {self.agent_steps:,} / {self.agent_steps_budget:,} agent steps"


class CurvePoint(_Model):
    """One checkpoint of the run's learning curve, as the evaluator measured it.

    Each point is a signed ``checkpoint`` event of the run (SubmitCheckpoint): the
    policy the agent committed at that moment (by its hash), the evaluator's own
    count of the run's practice steps when it arrived, and its mean return over
    the task's checkpoint episodes on hidden seeds. Nothing here is the agent's
    word, which is why the faithfulness gate may rest on it.
    """

    index: int = Field(description="0-based position of the checkpoint in the run.")
    checkpoint_id: str = Field(description="The checkpoint's id (its snapshot: ckpt-<id>).")
    practice_steps: int = Field(
        description="The run's practice agent steps, counted by the evaluator, when the "
        "checkpoint was received."
    )
    policy_sha256: str = Field(description="SHA-256 of the evaluated policy file.")
    episodes: int = Field(description="Hidden-seed checkpoint episodes evaluated.")
    mean_return: float = Field(description="Mean undiscounted return over those episodes.")
    std_return: float = Field(description="Standard deviation of those returns.")


class FailedCheckpoint(_Model):
    """A checkpoint the evaluator received but could not measure: a failed point of the
    learning curve.

    Each is a signed ``checkpoint_failed`` event of the run. It used up one of the
    run's checkpoints like a measured one and was answered exactly like one (the
    agent is never told, so a failure is no oracle on the hidden episodes); only
    this trusted side sees it. It has no return, so it can never raise a score: it
    is not in :attr:`EvalResult.learning_curve`.
    """

    index: int = Field(description="0-based position of the checkpoint in the run.")
    checkpoint_id: str = Field(description="The checkpoint's id (its snapshot: ckpt-<id>).")
    practice_steps: int = Field(
        description="The run's practice agent steps, counted by the evaluator, when the "
        "checkpoint was received."
    )
    policy_sha256: str = Field(
        description="SHA-256 of the policy file; empty when no file could be snapshotted."
    )
    source: Literal["submission", "infrastructure"] = Field(
        description="'submission': the policy's fault (it broke a contract rule, or its "
        "actions, rewards or returns were not finite on a checkpoint episode); "
        "'infrastructure': the evaluator failed, never the agent's fault."
    )
    rule: str = Field(description="What failed: contract, non_finite_action, ...")
    reason: str = Field(description="The failure in words (never a seed or a step).")


class HostInfo(_Model):
    platform: str
    machine: str
    python: str
    cpu_count: int
    blas: str = Field(
        default="unknown",
        description="numpy's BLAS and the CPU kernel it picked (evaluator.blas.numpy_blas): "
        "hosts whose kernels differ give policies' actions that differ in their last bits.",
    )


# ----------------------------------------------------- per-episode outcomes --
#
# One record per kind of measurement, each holding what a rollout kind measures per episode
# and enough to recompute every task metric from it alone (so the audit can check the
# signed outcomes against the signed metrics). Which record a job gets is its kind's choice
# (RolloutKind.outcome_record); the stored JSON names the kind in ``backend`` (the key
# results and signed events have always had), which is also what picks the model when a
# result is read back. ``host_dependent`` names the fields a re-run on another host (an
# audit) reproduces only approximately: wall-clock times and what follows from a path found
# within a time limit. They are re-measured and shown, never compared; every other field
# must match exactly.


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
        {"planning_time_s", "states_checked", "reason"}
    )

    index: int = Field(description="Position in the task's base-seed list.")
    success: bool = Field(description="The path passed dense validation and reached the goal.")
    collided: bool = Field(description="The returned path hit something (self or scene).")
    planning_time_s: float = Field(
        description="Seconds the planner took on this problem, measured by the evaluator "
        "(wall clock: host-dependent)."
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


_Entry = RolloutEpisodeOutcome | PlanningProblemOutcome | ReplayInstanceOutcome


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


_OTHER_RECORDS: dict[str, str] = {
    **{name: "planning" for name in get_args(PlanningOutcomes.model_fields["backend"].annotation)},
    **{name: "replay" for name in get_args(ReplayOutcomes.model_fields["backend"].annotation)},
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
    | Annotated[ReplayOutcomes, Tag("replay")],
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


class EvalResult(_Model):
    job_id: str
    run_id: str
    task_id: str
    task_config_sha256: str = Field(description="Hash of the exact task config evaluated.")
    state: JobState = Field(description="Terminal job state (SUCCEEDED, REJECTED, FAILED, ...).")
    failure_source: FailureSource = Field(
        default=FailureSource.NONE, description="'submission' or 'infrastructure'."
    )
    failure_reason: str = Field(default="")
    submission_files: dict[str, str] = Field(
        default_factory=dict, description="Snapshot file name -> SHA-256."
    )
    metrics: dict[str, float] = Field(
        default_factory=dict, description="Evaluator-measured metrics; empty unless SUCCEEDED."
    )
    episodes: list[EpisodeRecord] = Field(default_factory=list)
    evidence_files: dict[str, str] = Field(
        default_factory=dict,
        description="Evidence files of the submission (meta.json, curve.csv...) as base64 of "
        "the frozen bytes, for the harness's faithfulness gate.",
    )
    tensor_shapes: dict[str, list[int]] = Field(
        default_factory=dict, description="State-dict key -> shape of the evaluated policy."
    )
    secret_sha256: str = Field(description="Commitment to the hidden-seed secret.")
    evaluator_version: str
    simulator_versions: dict[str, str] = Field(default_factory=dict)
    host: HostInfo | None = None
    timings: Timings | None = None
    attempts: int = Field(default=1, description="Pipeline attempts (retries after crashes).")
    events: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Signed trusted-evaluator events of the run, in eval_seq order.",
    )
    outcomes: BatchOutcomes | None = Field(
        default=None,
        description="Batch jobs that SUCCEEDED: every episode's outcome in its backend's terms "
        "(per-problem success, collision and planning time; per-instance success and final "
        "distance; per-episode returns), in index order. The signed `result` event holds the "
        "same. None otherwise (interactive eval sessions: see episodes).",
    )
    read_on_harness_channel: bool = Field(
        default=False, description="Set on every result read over the harness channel."
    )
    official: bool = Field(
        default=False,
        description="The task's official result: its full protocol (never a smoke run), read "
        "over the harness channel.",
    )
    smoke_run: SmokeRun | None = Field(
        default=None,
        description="Set when the evaluator ran a smoke run (fewer episodes than the task's "
        "protocol, an operator option): the metrics are not the task's official measurement.",
    )
    training: TrainingUsage | None = Field(
        default=None,
        description="The run's practice steps, counted by the evaluator, against the task's "
        "training budget: interactive eval sessions, and batch results of tasks whose "
        "simulator is the evaluator's (training.simulator 'evaluator'; counted when the "
        "result was built); None for other batch results.",
    )
    learning_curve: list[CurvePoint] = Field(
        default_factory=list,
        description="Batch results of tasks with training.checkpoints: the run's checkpoints "
        "as the evaluator measured them (signed `checkpoint` events, in order) when the "
        "result was built; empty otherwise.",
    )
    failed_checkpoints: list[FailedCheckpoint] = Field(
        default_factory=list,
        description="Batch results of tasks with training.checkpoints: the run's checkpoints "
        "the evaluator could not measure (signed `checkpoint_failed` events, in order) when "
        "the result was built. Failed points of the learning curve, with no return: they "
        "are not in learning_curve, so they never raise a score.",
    )
