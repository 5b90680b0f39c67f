"""What the agent SDK answers with (:mod:`.sdk`): a job's status, a checkpoint's
acknowledgement, a run's grant, the task as the agent sees it; and the status poll's pace.
Plain data made from the protocol's messages, apart from the client that fetches them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ale_robotics.tasks.contract import SubmissionContract
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = [
    "FIRST_POLL_S",
    "LATE_POLLS",
    "TERMINAL",
    "CheckpointAck",
    "JobStatus",
    "RunGrant",
    "TaskView",
    "poll_interval",
]

_STATE_NAMES = {v: k.removeprefix("JOB_STATE_") for k, v in pb.JobState.items()}
_SOURCE_NAMES = {
    pb.FAILURE_SOURCE_UNSPECIFIED: "",
    pb.FAILURE_SOURCE_SUBMISSION: "submission",
    pb.FAILURE_SOURCE_INFRASTRUCTURE: "infrastructure",
}
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "REJECTED", "TIMED_OUT", "CANCELLED"})

FIRST_POLL_S = 0.05
"""The shortest interval between two status polls of :meth:`AleClient.wait`."""
LATE_POLLS = 3
"""Status polls in a row that :meth:`AleClient.wait` asks again after a deadline passed."""


def poll_interval(waited_s: float, most_s: float) -> float:
    """Seconds to the next status poll after ``waited_s`` of waiting: a tenth of the time
    waited, at least :data:`FIRST_POLL_S` and at most ``most_s`` (see :meth:`AleClient.wait`).

    The delay between a job's end and the poll that sees it is then at most about a
    tenth of the job's time (at least 50 ms, at most ``most_s``).
    """
    return min(most_s, max(FIRST_POLL_S, waited_s / 10))


@dataclass(frozen=True)
class JobStatus:
    """What an agent may know about its job: state and progress, never the metric."""

    job_id: str
    task_id: str
    state: str
    episodes_done: int
    episodes_total: int
    queue_position: int
    failure_source: str
    failure_reason: str
    heartbeat_unix: float
    progress_coarse: bool = False
    """True on the agent channel: ``episodes_done`` is 0 until the job SUCCEEDED, then
    ``episodes_total``, and ``heartbeat_unix`` is 0 (no per-episode timing)."""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @classmethod
    def from_proto(cls, r: pb.GetBatchEvalStatusResponse) -> JobStatus:
        return cls(
            job_id=r.job_id,
            task_id=r.task_id,
            state=_STATE_NAMES.get(r.state, "UNSPECIFIED"),
            episodes_done=r.progress.episodes_done,
            episodes_total=r.progress.episodes_total,
            queue_position=r.queue_position,
            failure_source=_SOURCE_NAMES.get(r.failure_source, ""),
            failure_reason=r.failure_reason,
            heartbeat_unix=r.heartbeat_unix,
            progress_coarse=r.progress.coarse,
        )


@dataclass(frozen=True)
class CheckpointAck:
    """A committed checkpoint, as the agent may know it: never its returns (no oracle)."""

    checkpoint_id: str
    index: int
    """0-based position of the checkpoint in the run's learning curve."""
    practice_steps: int
    """The run's practice agent steps, counted by the evaluator, when it was received."""
    deduplicated: bool
    """True when the client token matched an earlier checkpoint (a retry)."""
    checkpoints_left: int
    """Checkpoints the run may still commit."""

    @classmethod
    def from_proto(cls, r: pb.SubmitCheckpointResponse) -> CheckpointAck:
        return cls(
            checkpoint_id=r.checkpoint_id,
            index=r.index,
            practice_steps=r.practice_steps,
            deduplicated=r.deduplicated,
            checkpoints_left=r.checkpoints_left,
        )


@dataclass(frozen=True)
class RunGrant:
    """A run registered on a shared evaluator (OpenRun): what its agent gets, and only that."""

    run_id: str
    task_id: str
    agent_token: str = field(repr=False)
    submission_dir: str
    """The run's directory as the evaluator sees it ("" without a submission volume)."""
    submission_subdir: str
    """The same, relative to the volume root (for a harness that mounts it elsewhere)."""


@dataclass(frozen=True)
class TaskView:
    """GetSpec, parsed: the task config and contract as the evaluator's own models."""

    task: TaskSpec
    contract: SubmissionContract | None
    budget_s: float
    max_submissions: int
    max_message_bytes: int
    protocol_version: str
    raw: pb.GetSpecResponse
    training_agent_steps: int | None = None
    """The training budget in agent steps (Step calls x envs over every practice session
    of the run); None when the task has none."""
    training_agent_steps_used: int = 0
    """Agent steps the run has taken in practice sessions when GetSpec answered."""
    training_steps_enforced: bool = False
    """True when the evaluator refuses practice Steps past the budget (RESOURCE_EXHAUSTED)."""
    training_budget: str = ""
    """The budget in words: its value in the paper's unit and what that is in agent steps."""
    brief: str = ""
    """The task brief (Markdown): goal, the paper's method and protocol, contract, budgets,
    score, gate and how to submit; the same text as ``$ALE_TASK_DIR/brief.md``."""

    @property
    def training_agent_steps_left(self) -> int | None:
        """Practice agent steps the run may still take; None without a budget."""
        if self.training_agent_steps is None:
            return None
        return max(0, self.training_agent_steps - self.training_agent_steps_used)
