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

from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from ale_robotics.model.outcomes import BatchOutcomes
from ale_robotics.model.states import FailureSource, JobState

if TYPE_CHECKING:
    pass

__all__ = [
    "CurvePoint",
    "EngineUsed",
    "EpisodeRecord",
    "EvalResult",
    "FailedCheckpoint",
    "Floor",
    "HostInfo",
    "HostLoad",
    "MetricInterval",
    "SmokeRun",
    "Timings",
    "TrainingUsage",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricInterval(_Model):
    """A metric's 95% percentile-bootstrap interval over the result's episodes."""

    low: float
    high: float


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


class Floor(_Model):
    """What doing nothing scores on the run's own hidden seeds, measured by the evaluator.

    A reader of a score needs to know how much of it is free: a Reacher that never moves
    already has a small cost, a Hopper that stands still already collects its alive bonus.
    The floor is the same measurement (same kind, same engine, same hidden seeds) of a
    submission that does nothing, so the score can be read beside it and the
    baseline-normalized figure ``(measured - floor) / (target - floor)`` computed from it.
    It never changes the official score, which keeps the published formula.
    """

    policy: Literal["null_action", "zero_output"] = Field(
        description="'null_action': every step plays the task's null action (zero where the "
        "action bounds allow it, else their centre; interactive tasks, and replay tasks whose "
        "submitted action sequences are all null actions); 'zero_output': the contract's "
        "policy with every weight zero (batch policy tasks)."
    )
    metrics: dict[str, float] = Field(
        description="The task's metrics of those episodes, computed as the official ones."
    )
    episode_returns: list[float] = Field(
        default_factory=list, description="Each episode's return, in episode index order."
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


class HostLoad(_Model):
    """The host's load around a job (``os.getloadavg``: runnable and uninterruptible tasks,
    averaged over 1, 5 and 15 minutes). Read beside ``cpu_count``: a load above it means
    processes waited for a CPU, which stretches wall-clock times (issue 27: a wall-timed
    planner failed problems at a load of ~12)."""

    start: list[float] | None = Field(
        default=None, description="1, 5 and 15 minute load averages when the job started."
    )
    end: list[float] = Field(description="1, 5 and 15 minute load averages when it ended.")


class HostInfo(_Model):
    platform: str
    machine: str
    python: str
    cpu_count: int
    load: HostLoad | None = Field(
        default=None, description="The host's load around the job (absent before issue 27)."
    )
    blas: str = Field(
        default="unknown",
        description="numpy's BLAS and the CPU kernel it picked (evaluator.blas.numpy_blas): "
        "hosts whose kernels differ give policies' actions that differ in their last bits.",
    )


class EngineUsed(_Model):
    """The engine environment that ran a batch job's episodes (``ale_robotics.engines``).

    Results of one task from different engines, or from one engine on different devices,
    need not agree to the bit (another simulator build, GPU float reductions), so a
    result says which produced it, and rankings keep them apart unless the task says
    they are comparable."""

    name: str = Field(description="The engine's name ('mujoco-warp').")
    key: str = Field(description="Its build's key: the engine, its Python and its pins.")
    device: str = Field(default="", description="Where it simulated ('cpu', 'cuda:0'...).")
    python: str = Field(default="", description="The engine interpreter's version.")
    versions: dict[str, str] = Field(
        default_factory=dict, description="Versions of the engine's simulator stack."
    )

    @property
    def label(self) -> str:
        """``name`` and device, as listings show it (``mujoco-warp/cpu``)."""
        return f"{self.name}/{self.device}" if self.device else self.name


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
    intervals: dict[str, MetricInterval] = Field(
        default_factory=dict,
        description="Each metric's 95% percentile-bootstrap interval over the episodes "
        "(the episodes resampled with replacement 1,999 times, seed 0: the same episodes "
        "always give the same interval); empty unless SUCCEEDED or with fewer than 2 "
        "episodes.",
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
    engine: EngineUsed | None = Field(
        default=None,
        description="Batch jobs of a kind that runs in an engine environment of its own: "
        "which engine, device and simulator versions produced the episodes (the "
        "simulator_versions are then the evaluator's, not the episodes'); None: the "
        "evaluator's own environment.",
    )
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
    floor: Floor | None = Field(
        default=None,
        description="Measured results (SUCCEEDED) of tasks with a null submission: the same "
        "measurement of doing nothing on the same hidden seeds (Floor); None otherwise, "
        "floor_note says why.",
    )
    floor_note: str = Field(
        default="",
        description="Why a SUCCEEDED result has no floor (its kind has no null submission, or "
        "measuring it failed); empty otherwise.",
    )
    failed_checkpoints: list[FailedCheckpoint] = Field(
        default_factory=list,
        description="Batch results of tasks with training.checkpoints: the run's checkpoints "
        "the evaluator could not measure (signed `checkpoint_failed` events, in order) when "
        "the result was built. Failed points of the learning curve, with no return: they "
        "are not in learning_curve, so they never raise a score.",
    )
