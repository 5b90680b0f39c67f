"""The run report: ``result.json`` (versioned schema) and a plot a person can look at."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ale_robotics.evaluator.result import EvalResult, SmokeRun
from ale_robotics.harness.plot import plot_episodes, plot_learning_curve, wants_learning_curve
from ale_robotics.scoring import HarnessEvidence, ScoreReport

__all__ = ["RunReport", "StoppedRunReport", "load_run_report", "write_report", "write_stopped"]

log = logging.getLogger(__name__)


class RunReport(BaseModel):
    """Everything a run concluded, as written to ``runs/<run_id>/result.json``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2] = 2
    """2 added ``state``; a version-1 file is a completed run."""
    state: Literal["completed"] = Field(
        default="completed",
        description="'completed': the run reached a verdict (a score, possibly 0). An "
        "interrupted or failed run writes a :class:`StoppedRunReport` instead.",
    )
    run_id: str = Field(description="Identifier the harness created for this run.")
    task_id: str = Field(description="Task evaluated.")
    agent_cmd: str = Field(description="Command line the agent was started with.")
    agent_exit_code: int | None = Field(description="Agent exit status (None if killed).")
    agent_budget_exceeded: bool = Field(description="True if the harness stopped the agent.")
    agent_disk_quota_exceeded: bool = Field(
        default=False,
        description="True if the harness stopped the agent for writing more than its disk "
        "quota into its scratch and submission directories.",
    )
    agent_log_truncated: bool = Field(
        default=False, description="True if agent.log was cut at its size cap."
    )
    budget_s: float = Field(description="Wall-clock budget the agent had.")
    sandbox: str = Field(default="none", description="'bwrap' or 'none': how the agent ran.")
    agent_cgroup: str = Field(
        default="none",
        description="'v1' or 'v2': the agent ran in a cgroup of the run's own (capped and "
        "measured); 'none': cgroups could not be used here (agent_cgroup_warning says why).",
    )
    agent_cgroup_warning: str | None = Field(
        default=None,
        description="Why the agent's CPU and memory were not capped or measured, or what of "
        "it was not; None when all of it was.",
    )
    agent_limits: dict[str, float | int | None] = Field(
        default_factory=dict,
        description="The agent's caps: cpus, memory_bytes, pids_max (None: uncapped).",
    )
    agent_cpu_s: float | None = Field(
        default=None,
        description="CPU-seconds (user + system) used by all the agent's processes, from its "
        "cgroup; None where not measured.",
    )
    agent_peak_memory_bytes: int | None = Field(
        default=None,
        description="Peak memory of the agent's cgroup (page cache and tmpfs included); None "
        "where not measured.",
    )
    agent_oom_killed: bool = Field(
        default=False,
        description="True if the kernel's OOM killer killed a process of the agent at its "
        "memory limit.",
    )
    agent_frozen_s: float = Field(
        default=0.0,
        description="Seconds the agent was frozen while a job with host-timed metrics "
        "(planning_time) was queued or running; they do not count against its budget.",
    )
    wall_s: float = Field(description="Seconds from run start to verdict.")
    job_state: str = Field(description="Terminal state of the evaluated job, or NO_SUBMISSION.")
    eval_result: EvalResult | None = Field(
        description="The official EvalResult read over the harness channel (events are in "
        "trajectory.jsonl)."
    )
    harness_evidence: HarnessEvidence | None = Field(
        default=None,
        description="What the harness measured of the agent for the faithfulness gate (its "
        "wall clock, frozen time excluded, and CPU time) against the task's budget; None in "
        "reports written before it existed.",
    )
    score: ScoreReport = Field(description="The full score report.")
    smoke_run: SmokeRun | None = Field(
        default=None,
        description="Set for a smoke run (ale-robotics run --episodes N): only the first N of "
        "the task's episodes were evaluated, so this is not an official result.",
    )
    trajectory_head: str = Field(
        default="",
        description="Hash of the last trajectory event when the report was written; "
        "pass it to 'trajectory verify --head' to detect events cut from the end.",
    )
    trajectory_sha256: str = Field(
        default="", description="SHA-256 of trajectory.jsonl when the report was written."
    )
    trajectory_events: int = Field(default=0, description="Events in trajectory.jsonl then.")


class StoppedRunReport(BaseModel):
    """``result.json`` of a run that ended without a verdict: no score, and why.

    ``interrupted``: the operator stopped it (Ctrl-C, SIGTERM); the agent and the
    evaluator's work for the run were stopped and its unfinished jobs cancelled.
    ``failed``: the infrastructure failed (the sandbox did not start, the evaluator
    failed the job for infrastructure reasons); not the agent's score, re-run it.
    Either way the trajectory ends with a harness event saying so
    (``run_interrupted`` or ``run_failed``).
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2] = 2
    state: Literal["interrupted", "failed"] = Field(description="How the run ended.")
    run_id: str = Field(description="Identifier the harness created for this run.")
    task_id: str = Field(description="Task the run was for.")
    agent_cmd: str = Field(description="Command line the agent was started with.")
    reason: str = Field(description="What stopped the run, in words.")
    signal: str | None = Field(
        default=None, description="For an interrupted run: the signal (SIGINT, SIGTERM)."
    )
    phase: str = Field(
        description="Where the run was: 'setup', 'agent' (the agent was running), "
        "'evaluating' (the agent had finished; its job was being evaluated) or 'scoring'."
    )
    cancelled_jobs: list[str] = Field(
        default_factory=list, description="The run's unfinished jobs the evaluator cancelled."
    )
    agent_exit_code: int | None = Field(
        default=None, description="Agent exit status, if it had exited (None if killed)."
    )
    wall_s: float = Field(description="Seconds from run start to the stop.")
    trajectory_head: str = Field(
        default="", description="Hash of the last trajectory event (the run_interrupted one)."
    )
    trajectory_sha256: str = Field(
        default="", description="SHA-256 of trajectory.jsonl when the report was written."
    )
    trajectory_events: int = Field(default=0, description="Events in trajectory.jsonl then.")


_AnyReport = TypeAdapter(Annotated[RunReport | StoppedRunReport, Field(discriminator="state")])


def load_run_report(path: Path) -> RunReport | StoppedRunReport:
    """Parse a ``result.json``: a completed run's report or a stopped run's.

    Raises ``OSError`` when it cannot be read and ``pydantic.ValidationError`` when
    it is not a run report.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "state" not in data:
        data["state"] = "completed"  # schema 1 files
    return _AnyReport.validate_python(data)


def _write_json(run_dir: Path, report: BaseModel, trajectory: Path) -> BaseModel:
    data = trajectory.read_bytes() if trajectory.exists() else b""
    report = report.model_copy(
        update={
            "trajectory_sha256": hashlib.sha256(data).hexdigest(),
            "trajectory_events": data.count(b"\n"),
        }
    )
    out = run_dir / "result.json"
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return report


def write_stopped(run_dir: Path, report: StoppedRunReport, trajectory: Path) -> Path:
    """Write an interrupted or failed run's ``result.json`` atomically (no plot)."""
    _write_json(run_dir, report, trajectory)
    return run_dir / "result.json"


def write_report(run_dir: Path, report: RunReport, trajectory: Path) -> Path:
    """Write ``result.json`` atomically, then ``episodes.png`` when there are episodes and
    ``learning_curve.png`` when the run has a learning curve (or its task takes checkpoints).

    The result comes first and the plot can only fail on its own: a report that
    cannot be drawn (a broken font cache, a full disk, a hostile config) is
    logged, never a lost result.
    """
    written = _write_json(run_dir, report, trajectory)
    assert isinstance(written, RunReport)
    report = written
    out = run_dir / "result.json"
    if report.eval_result is not None and report.eval_result.episodes:
        try:
            plot_episodes(report.eval_result, report.score.target_value, run_dir / "episodes.png")
        except Exception as exc:  # BaseException (SystemExit) is matplotlib's to not raise
            log.warning(
                "episodes.png not drawn (%s: %s); result.json is complete", type(exc).__name__, exc
            )
    if report.eval_result is not None:
        try:
            if wants_learning_curve(report.eval_result):
                plot_learning_curve(report.eval_result, run_dir / "learning_curve.png")
        except Exception as exc:  # as above: the plot never costs the result
            log.warning(
                "learning_curve.png not drawn (%s: %s); result.json is complete",
                type(exc).__name__,
                exc,
            )
    return out
