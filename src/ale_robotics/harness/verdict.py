"""The end of a scored run: its result awaited, scored, result.json written, the verdict said.

Once the agent is done the harness waits for the run's newest job to be terminal
(:func:`await_result`), adds its signed events to the trajectory, scores it with the
gate's evidence (the evaluator's, and the harness's own measurements of the agent) and
writes the report (:func:`score_run`), whose plots are drawn while the evaluator
stops. Apart from :mod:`.run`, which starts the evaluator and the agent, because this
is what decides and records the run's score, read in one place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pydantic

from ale_robotics.client.sdk import AleClient, poll_interval
from ale_robotics.errors import UnavailableError
from ale_robotics.evaluator.batch.smoke import smoke_run
from ale_robotics.gateway import ModelUsage
from ale_robotics.harness.agent.context import AgentRun
from ale_robotics.harness.agent.supervisor import latest_job
from ale_robotics.harness.evidence import gate_evidence, harness_evidence
from ale_robotics.harness.options.agent import agent_env_pairs
from ale_robotics.harness.report import RunReport, start_report
from ale_robotics.harness.run_context import RunContext
from ale_robotics.model.result import EvalResult, SmokeRun
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.scoring import GateEvidence, HarnessEvidence, ScoreReport, score
from ale_robotics.tasks.manifest import PaperTarget
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import SignedEvaluatorEvent
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["RunOutcome", "await_result", "read_eval_result", "score_run"]


@dataclass
class RunOutcome:
    """What :func:`.run.run_task` returns: the run, its report and its one-line verdict."""

    run_id: str
    run_dir: Path
    report: RunReport
    score_line: str
    agent_log_tail: list[str] = dataclasses.field(default_factory=list)
    """The last lines of ``agent.log`` when the agent exited with an error (a crash to
    look at), else empty."""


LOG_TAIL_LINES = 10


_RESULT_POLL_S = 0.25
"""The longest interval between two status polls while the harness waits for a result."""


def read_eval_result(text: str) -> EvalResult:
    """The evaluator's official result as this harness reads it; HarnessError (the run
    fails as infrastructure, re-run it) when it is not one: an evaluator of another
    release, typically an evaluator image older than this harness."""
    try:
        return EvalResult.model_validate_json(text)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise HarnessError(
            f"the evaluator's result is not one this ale-robotics reads ({where}: "
            f"{first['msg']}): the evaluator runs another release; run the same release on "
            "both sides (for the evaluator container, rebuild it with 'make images')"
        ) from None


def await_result(ctx: RunContext, harness: AleClient) -> EvalResult | None:
    """The official result of the run's newest job once it is terminal (None: no job).

    Its signed events join the run's trajectory; an infrastructure failure raises
    :class:`HarnessError` (it is no score of the agent's): a job the evaluator failed,
    a submission its storage could not take (the run's newest job then reads FAILED,
    INFRASTRUCTURE), and an evaluator that cannot answer (UNAVAILABLE after retries).
    """
    try:
        return _read_result(ctx, harness)
    except UnavailableError as exc:
        raise HarnessError(
            f"the evaluator could not answer for the run's result ({exc.message}); this is "
            "not the agent's score, re-run it"
        ) from None


def _read_result(ctx: RunContext, harness: AleClient) -> EvalResult | None:
    """:func:`await_result` while the evaluator answers."""
    job = latest_job(harness)
    if job is None:
        return None
    progress = ctx.on_progress
    start = time.monotonic()
    while not job.terminal:
        if progress is not None:
            progress("evaluating", job, ctx.elapsed(), ctx.budget_s)
        # As the SDK's wait: every 50 ms at first, then a tenth of the time waited.
        ctx.stop.sleep(poll_interval(time.monotonic() - start, _RESULT_POLL_S))
        job = harness.status(job.job_id)
    if progress is not None:
        progress("done", job, ctx.elapsed(), ctx.budget_s)
    r = harness._call(harness.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job.job_id))
    result = read_eval_result(r.eval_result_json)
    for event in result.events:
        ctx.traj.append_signed(SignedEvaluatorEvent.model_validate(event))
    if result.failure_source == "infrastructure":
        raise HarnessError(
            f"the evaluator failed for infrastructure reasons ({result.state}): "
            f"{result.failure_reason}; this is not the agent's score, re-run it"
        )
    return result


def score_run(
    ctx: RunContext,
    agent: AgentRun,
    result: EvalResult | None,
    agent_wall_s: float,
    model_usage: ModelUsage | None = None,
) -> RunOutcome:
    """Score the result, write result.json (with the trajectory head) and say the verdict.

    The gate's evidence is the evaluator's (the result: frozen files, tensors, practice
    steps, learning curve) and the harness's own measurements of the agent (its wall
    clock and cgroup CPU time), kept in result.json so the audit can recompute the score.
    """
    task, opts = ctx.task, ctx.opts
    usage = agent.usage
    measured = harness_evidence(
        agent_wall_s=agent_wall_s,
        run_budget_s=ctx.budget_s,
        agent_cpu_s=usage.cpu_s if usage is not None else None,
        manifest_entry=ctx.manifest_entry,
    )
    report = _score(ctx, agent, result, measured)
    smoke = None if opts.episodes is None else smoke_run(task, opts.episodes)
    report, line = _score_line(report, smoke, model_usage)
    run_report = _run_report(ctx, agent, result, measured, report, smoke, model_usage)
    last = ctx.traj.append(
        "harness",
        "score",
        {"status": report.status, "score": report.score, "line": line},
    )
    # The plots are drawn while the evaluator stops; run_task waits for them (RunPhase).
    ctx.phase.plots = start_report(
        ctx.run_dir, run_report.model_copy(update={"trajectory_head": last.hash}), ctx.traj.path
    )
    return RunOutcome(
        run_id=ctx.run_id,
        run_dir=ctx.run_dir,
        report=run_report,
        score_line=line,
        agent_log_tail=_log_tail(agent.log_path) if agent.crashed else [],
    )


def _score(
    ctx: RunContext, agent: AgentRun, result: EvalResult | None, measured: HarnessEvidence
) -> ScoreReport:
    """The score of a succeeded job through the gate (abandoned episodes and the training
    summary said), else of no metric with the reason; the agent's stop reason first."""
    task = ctx.task
    target = ctx.registry.target(task.id)
    if result is not None and result.state == "SUCCEEDED":
        with tempfile.TemporaryDirectory(prefix="ale-evidence-") as tmp:
            evidence = gate_evidence(result, Path(tmp), task=task, harness=measured)
            report = score(task, result.metrics, target, evidence)
            report = _with_interval(report, task, result, target, evidence)
        floor = None if result.floor is None else result.floor.metrics.get(report.primary_metric)
        if floor is not None and result.floor is not None:
            report = report.with_floor(floor, result.floor.policy)
        if task.mode is TaskMode.INTERACTIVE:  # unfinished episodes: played out with null actions
            report = report.with_abandoned(
                sum(e.abandoned for e in result.episodes), len(result.episodes)
            )
        if result.training is not None:
            report = report.model_copy(
                update={"explanation": f"{report.explanation} {result.training.summary()}."}
            )
    else:
        why = _no_metric_reason(result, agent.exit_code, agent.timed_out, task.mode)
        if result is None and not agent.timed_out and agent.exit_code:
            why += f"; its output is in {agent.log_path}"
        report = score(task, {}, target, no_result=why)
    stopped = agent.stopped_reason()
    if stopped is not None:
        report = report.model_copy(update={"explanation": f"{stopped} {report.explanation}"})
    return report


def _with_interval(
    report: ScoreReport,
    task: TaskSpec,
    result: EvalResult,
    target: PaperTarget | None,
    evidence: GateEvidence,
) -> ScoreReport:
    """``report`` with the score at both ends of the primary metric's interval over the
    episodes (other metrics as measured), when the run is scored and the result has one."""
    interval = result.intervals.get(report.primary_metric)
    if report.status != "scored" or interval is None:
        return report
    ends = [
        score(task, {**result.metrics, report.primary_metric: end}, target, evidence).score
        for end in (interval.low, interval.high)
    ]
    if any(e is None for e in ends):
        return report
    low, high = sorted(e for e in ends if e is not None)
    return report.model_copy(update={"score_interval": (low, high)})


def _score_line(
    report: ScoreReport, smoke: SmokeRun | None, model_usage: ModelUsage | None
) -> tuple[ScoreReport, str]:
    """The report and its one-line verdict, each saying that a smoke run is not official,
    the line also what the agent used of its model."""
    line = report.score_line()
    if smoke is not None:
        what = f"a smoke run of {smoke.episodes} of {smoke.of} episodes (--episodes)"
        report = report.model_copy(
            update={"explanation": f"This is {what}, not an official result. {report.explanation}"}
        )
        line += f" [smoke run: {smoke.episodes} of {smoke.of} episodes, not official]"
    if model_usage is not None:
        line += f" [{model_usage.summary()}]"
    return report, line


def _run_report(
    ctx: RunContext,
    agent: AgentRun,
    result: EvalResult | None,
    measured: HarnessEvidence,
    report: ScoreReport,
    smoke: SmokeRun | None,
    model_usage: ModelUsage | None,
) -> RunReport:
    """result.json's content (without the trajectory head, which the score event gives):
    the agent as the harness measured it, the evaluator's result and the score."""
    usage = agent.usage
    return RunReport(
        run_id=ctx.run_id,
        task_id=ctx.task.id,
        agent_cmd=ctx.opts.agent_cmd,
        agent_tools=[str(p) for p in ctx.opts.agent_tools],
        agent_env=agent_env_pairs(ctx.opts),
        agent_exit_code=agent.exit_code,
        agent_idle_longest_s=agent.idle_longest_s,
        agent_idle_reported=agent.idle_reported,
        agent_budget_exceeded=agent.timed_out,
        agent_disk_quota_exceeded=agent.quota_exceeded is not None,
        agent_log_truncated=agent.log_truncated,
        budget_s=ctx.budget_s,
        sandbox=ctx.sandbox.name,
        agent_cgroup=agent.cgroup,
        agent_cgroup_warning=agent.cgroup_warning,
        agent_limits=agent.limits.as_dict(),
        agent_cpu_s=usage.cpu_s if usage is not None else None,
        agent_peak_memory_bytes=usage.peak_memory_bytes if usage is not None else None,
        agent_oom_killed=agent.oom_kills > 0,
        agent_frozen_s=round(agent.frozen_s, 3),
        wall_s=ctx.elapsed(),
        job_state=result.state if result else "NO_SUBMISSION",
        eval_result=result.model_copy(update={"events": []}) if result else None,
        harness_evidence=measured,
        score=report,
        smoke_run=smoke,
        model_usage=model_usage,
        # submission_sha256, evaluator_version, simulator_versions and official follow
        # from eval_result and smoke_run (RunReport's one rule, also for older files)
        label=ctx.label,
        inspect=ctx.inspect,
        repetition=ctx.opts.repetition,
        agent_seed=ctx.opts.agent_seed,
        started_at=ctx.started_at,
        ended_at=dt.datetime.now(dt.UTC),
    )


def _log_tail(log_path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of the agent's log (it is capped, so reading it is cheap)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def _no_metric_reason(
    result: EvalResult | None,
    exit_code: int | None,
    timed_out: bool,
    mode: TaskMode = TaskMode.BATCH,
) -> str:
    if result is None:
        how = "ran past its budget" if timed_out else f"exited with code {exit_code}"
        if mode is TaskMode.INTERACTIVE:
            return f"no eval session: the agent {how} without opening its eval session"
        return f"no submission: the agent {how} without calling SubmitBatchEval"
    return f"submission {result.state.lower()}: {result.failure_reason}"
