"""What the agent phase of a run is given (:class:`AgentRunContext`) and gives back
(:class:`AgentRun`), and the progress callback the command line draws with; apart from
:mod:`.proc` and :mod:`.supervisor` so that both (and the run) share them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ale_robotics.client.sdk import JobStatus
from ale_robotics.harness.agent.io import format_bytes
from ale_robotics.harness.interrupt import StopRequest
from ale_robotics.harness.options import RunOptions
from ale_robotics.sandboxes import Sandbox
from ale_robotics.sandboxes.cgroups import Limits, Usage
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import TrajectoryWriter

from .activity import AgentActivity


class Progress(Protocol):
    """What the CLI draws: the phase, the job's status, the elapsed time and the budget,
    and in the agent phase what the agent is doing (:class:`.activity.AgentActivity`)."""

    def __call__(
        self,
        phase: str,
        job: JobStatus | None,
        elapsed: float,
        budget: float,
        activity: AgentActivity | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class AgentRunContext:
    """What the agent phase of a run needs to know (one object instead of a dozen arguments)."""

    opts: RunOptions
    task: TaskSpec
    manifest_entry: ManifestEntry | None
    run_id: str
    run_dir: Path
    submission: Path
    budget_s: float
    started: float
    """``time.monotonic()`` when the run started: the budget counts from here."""
    traj: TrajectoryWriter
    stop: StopRequest
    sandbox: Sandbox
    """The run's sandbox, resolved (``auto`` is what this host can do)."""
    on_progress: Progress | None = None

    @property
    def workspace(self) -> Path:
        return (self.opts.workspace or Path.cwd()).resolve()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass(frozen=True)
class AgentRun:
    """What the agent phase produced, as the report and the score need it."""

    exit_code: int | None
    timed_out: bool
    """Killed by the harness at its wall-clock budget."""
    quota_exceeded: int | None
    """Bytes it had written when it went over its disk quota (None: it did not)."""
    log_path: Path
    log_truncated: bool
    limits: Limits
    cgroup: str
    """'v1', 'v2' or 'none'."""
    cgroup_warning: str | None
    usage: Usage | None
    frozen_s: float
    disk_quota_bytes: int
    idle_longest_s: float = 0.0
    """The longest stretch without a model or evaluator call (:mod:`.activity`)."""
    idle_reported: bool = False
    """A stretch went past ``--agent-idle-s`` (an ``agent_idle`` event records it)."""

    @property
    def oom_kills(self) -> int:
        return (self.usage.oom_kills or 0) if self.usage is not None else 0

    @property
    def crashed(self) -> bool:
        """It exited with an error of its own (not killed by the harness for a limit)."""
        return bool(self.exit_code) and not self.timed_out and self.quota_exceeded is None

    def stopped_reason(self) -> str | None:
        """Why the harness or the kernel stopped it early, in words; None if neither did."""
        stopped = None
        if self.quota_exceeded is not None:
            stopped = (
                f"The agent was stopped: it had written {format_bytes(self.quota_exceeded)} "
                "into its scratch and submission directories and its model transcript, "
                "over its "
                f"{format_bytes(self.disk_quota_bytes)} disk quota."
            )
        if self.oom_kills:
            oom = (
                f"The kernel's OOM killer killed {self.oom_kills} of the agent's processes at "
                f"its {format_bytes(self.limits.memory_bytes or 0)} memory limit."
            )
            stopped = oom if stopped is None else f"{stopped} {oom}"
        return stopped
