"""The run report: ``result.json`` and a plot a person can look at.

``result.json`` has one version, its top-level ``schema_version``: the ``eval_result``
and ``score`` it holds carry none of their own, so that a reader checks one number and a
change anywhere in the document bumps it. A file of another version is refused with a
message that says so (no reader of older layouts: none was ever released).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from ale_robotics.gateway.usage import ModelUsage
from ale_robotics.harness.plots.episodes import plot_episodes
from ale_robotics.harness.plots.learning_curve import plot_learning_curve, wants_learning_curve
from ale_robotics.model.result import EvalResult, SmokeRun
from ale_robotics.scoring import HarnessEvidence, ScoreReport

__all__ = [
    "SCHEMA_VERSION",
    "InspectRecord",
    "PlotsDrawing",
    "RunReport",
    "StoppedRunReport",
    "load_run_report",
    "start_report",
    "submission_sha256",
    "write_report",
    "write_stopped",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION: Literal[6] = 6
"""The ``result.json`` schema, the one this release writes and reads."""


def submission_sha256(files: Mapping[str, str]) -> str | None:
    """One digest of a submission's files (name -> SHA-256), None for no submission.

    The SHA-256 of the sorted ``name:sha256`` lines, each ending in a newline: two runs
    evaluated the same artifact exactly when their digests are equal, whatever the
    order the evaluator listed the files in.
    """
    if not files:
        return None
    lines = "".join(f"{name}:{digest}\n" for name, digest in sorted(files.items()))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def _this_version(data: Any) -> Any:
    """Refuse a ``result.json`` of another schema version, saying which, before any field
    error about a layout this release does not read."""
    if isinstance(data, dict) and "schema_version" in data:
        version = data["schema_version"]
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"result.json has schema_version {version!r}; this ale-robotics reads "
                f"schema_version {SCHEMA_VERSION} (re-run the task with this release)"
            )
    return data


class InspectRecord(BaseModel):
    """The Inspect AI sample whose tools were this run's agent (:mod:`ale_robotics.inspect`)."""

    model_config = ConfigDict(extra="forbid")

    log: str | None = Field(description="Where Inspect writes the eval's log (None: unknown).")
    model: str = Field(description="The model the Inspect agent used, as Inspect names it.")
    task: str = Field(description="The Inspect task.")
    eval_id: str = Field(description="Inspect's id of the task's evaluation.")
    sample_id: str = Field(description="The sample's id in its dataset.")
    epoch: int = Field(description="The sample's epoch (each its own run and hidden seeds).")


class RunReport(BaseModel):
    """Everything a run concluded, as written to ``runs/<run_id>/result.json``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[6] = SCHEMA_VERSION
    """The one version of the whole document (:data:`SCHEMA_VERSION`)."""
    state: Literal["completed"] = Field(
        default="completed",
        description="'completed': the run reached a verdict (a score, possibly 0). An "
        "interrupted or failed run writes a :class:`StoppedRunReport` instead.",
    )
    run_id: str = Field(description="Identifier the harness created for this run.")
    task_id: str = Field(description="Task evaluated.")
    agent_cmd: str = Field(description="Command line the agent was started with.")
    agent_tools: list[str] = Field(
        default_factory=list,
        description="Directories of agent software shown read-only in its sandbox, on its "
        "PATH (--agent-tools).",
    )
    agent_env: dict[str, str] = Field(
        default_factory=dict, description="Variables given to the agent with --agent-env."
    )
    agent_exit_code: int | None = Field(description="Agent exit status (None if killed).")
    agent_idle_longest_s: float = Field(
        default=0.0,
        description="The agent's longest stretch without a model call or an evaluator call, "
        "in seconds.",
    )
    agent_idle_reported: bool = Field(
        default=False,
        description="True if a stretch went past --agent-idle-s (an agent_idle event in the "
        "trajectory records it): the agent may have been stuck.",
    )
    agent_budget_exceeded: bool = Field(description="True if the harness stopped the agent.")
    agent_disk_quota_exceeded: bool = Field(
        default=False,
        description="True if the harness stopped the agent for writing more than its disk "
        "quota into its scratch and submission directories and its model transcript "
        "(model_calls.jsonl).",
    )
    agent_log_truncated: bool = Field(
        default=False, description="True if agent.log was cut at its size cap."
    )
    budget_s: float = Field(description="Wall-clock budget the agent had.")
    sandbox: str = Field(
        default="none", description="'bwrap', 'docker' or 'none': how the agent ran."
    )
    agent_cgroup: str = Field(
        default="none",
        description="'v1' or 'v2': the agent ran in a cgroup of the run's own (capped and "
        "measured); 'docker': in its container's (capped by Docker, sampled); 'none': "
        "cgroups could not be used here (agent_cgroup_warning says why).",
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
        "wall clock, frozen time excluded, and CPU time) against the task's budget.",
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
    started_at: AwareDatetime | None = Field(
        default=None,
        description="When the run started (ISO 8601, UTC).",
    )
    ended_at: AwareDatetime | None = Field(
        default=None,
        description="When the verdict was reached (ISO 8601, UTC).",
    )
    label: str = Field(
        default="",
        description="What groups this run with others of the same agent ('run --label'; "
        "by default the agent script's stem).",
    )
    inspect: InspectRecord | None = Field(
        default=None,
        description="The Inspect AI sample that drove the agent (its log and model); "
        "None: an agent command.",
    )
    repetition: int | None = Field(
        default=None, description="The run's repetition in its eval-set slot ('run --repetition')."
    )
    agent_seed: int | None = Field(
        default=None,
        description="The training seed the agent was given as ALE_SEED ('run --agent-seed').",
    )
    submission_sha256: str | None = Field(
        default=None,
        description="SHA-256 over the evaluated submission's files: of the sorted "
        "'name:sha256' lines of eval_result.submission_files; None without a submission. "
        "Derived from eval_result when absent.",
    )
    evaluator_version: str | None = Field(
        default=None,
        description="The evaluator's version (eval_result's); None without a result.",
    )
    simulator_versions: dict[str, str] = Field(
        default_factory=dict,
        description="The simulator stack's versions the result was measured with "
        "(eval_result's); empty without a result.",
    )
    official: bool = Field(
        default=False,
        description="True when this is the task's official result: not a smoke run, and "
        "the result was read on the harness channel. Only official runs are ranked. "
        "Derived from eval_result when absent.",
    )
    model_usage: ModelUsage | None = Field(
        default=None,
        description="What the agent asked its model (calls, tokens in and out, per model, "
        "the budget): counted by the run's model gateway, each call in model_calls.jsonl "
        "and a model_call trajectory event; or, for an agent driven by its caller (an "
        "Inspect sample), by the caller's own accounting. None: neither counted it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _check_version(cls, data: Any) -> Any:
        return _this_version(data)

    @model_validator(mode="after")
    def _from_eval_result(self) -> RunReport:
        """What the result says, where the report does not say it itself (the harness
        leaves these to the one rule here)."""
        given = self.model_fields_set
        result = self.eval_result
        if result is None:
            return self
        if "submission_sha256" not in given:
            self.submission_sha256 = submission_sha256(result.submission_files)
        if "evaluator_version" not in given:
            self.evaluator_version = result.evaluator_version
        if "simulator_versions" not in given:
            self.simulator_versions = dict(result.simulator_versions)
        if "official" not in given:
            self.official = (
                result.read_on_harness_channel
                and result.smoke_run is None
                and self.smoke_run is None
            )
        return self

    @property
    def agent_failure(self) -> str | None:
        """How the agent ended in error (a non-zero exit, or stopped at a limit) without
        submitting anything, e.g. "exited with code 2"; None if it did not. Such a run is
        scored all the same (0: the agent's fault); ``run --strict`` and ``eval-set
        --strict`` exit 1 for it."""
        if self.eval_result is not None or self.agent_exit_code == 0:
            return None
        if self.agent_budget_exceeded:
            return "ran past its budget"
        if self.agent_disk_quota_exceeded:
            return "went over its disk quota"
        if self.agent_exit_code is None:
            return "was stopped"
        return f"exited with code {self.agent_exit_code}"


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

    schema_version: Literal[6] = SCHEMA_VERSION
    """The one version of the whole document (:data:`SCHEMA_VERSION`)."""
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
    started_at: AwareDatetime | None = Field(
        default=None,
        description="When the run started (ISO 8601, UTC).",
    )
    ended_at: AwareDatetime | None = Field(
        default=None,
        description="When the run was stopped (ISO 8601, UTC).",
    )
    label: str = Field(
        default="",
        description="What groups this run with others of the same agent ('run --label').",
    )
    inspect: InspectRecord | None = Field(
        default=None,
        description="The Inspect AI sample that drove the agent; None: an agent command.",
    )
    repetition: int | None = Field(
        default=None, description="The run's repetition in its eval-set slot ('run --repetition')."
    )
    agent_seed: int | None = Field(
        default=None,
        description="The training seed the agent was given as ALE_SEED ('run --agent-seed').",
    )

    @model_validator(mode="before")
    @classmethod
    def _check_version(cls, data: Any) -> Any:
        return _this_version(data)


_AnyReport = TypeAdapter(Annotated[RunReport | StoppedRunReport, Field(discriminator="state")])


def load_run_report(path: Path) -> RunReport | StoppedRunReport:
    """Parse a ``result.json``: a completed run's report or a stopped run's.

    Raises ``OSError`` when it cannot be read and ``pydantic.ValidationError`` when
    it is not a run report.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
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
    _draw_plots(run_dir, written)
    return run_dir / "result.json"


class PlotsDrawing:
    """The plots of a report being drawn on a thread of their own (:func:`start_report`)."""

    def __init__(self, run_dir: Path, report: RunReport) -> None:
        self._thread = threading.Thread(
            target=_draw_plots, args=(run_dir, report), name="ale-report-plots", daemon=True
        )
        self._thread.start()

    def wait(self) -> None:
        """Return once the plots are written (or were not drawn: the log says why)."""
        self._thread.join()


def start_report(run_dir: Path, report: RunReport, trajectory: Path) -> PlotsDrawing:
    """:func:`write_report`, with the plots drawn on a thread: ``result.json`` is written
    when this returns, the plots when the returned handle's ``wait()`` does.

    Drawing takes a few tenths of a second (matplotlib); the harness overlaps it with
    stopping its embedded evaluator and waits for it before it returns, so the plots
    are there when the run is over, as with :func:`write_report`.
    """
    written = _write_json(run_dir, report, trajectory)
    assert isinstance(written, RunReport)
    return PlotsDrawing(run_dir, written)


def _draw_plots(run_dir: Path, report: RunReport) -> None:
    """The plots of :func:`write_report`, each failing on its own (logged)."""
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
