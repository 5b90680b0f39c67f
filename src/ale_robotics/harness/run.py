"""``ale-robotics run``: one run of one agent on one task, start to verdict.

The harness is trusted: it creates the run id and directories, starts (or
connects to) the evaluator, launches the agent with only the agent channel's
endpoint and token, enforces the wall-clock budget, then reads the official
result on the harness channel, scores it and writes the report. The agent never
gets the harness token, the evaluator state dir or the result.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.client.sdk import AleClient, poll_interval
from ale_robotics.envs.make import make_env
from ale_robotics.errors import AleError, InvalidArgumentError, UnavailableError
from ale_robotics.evaluator.batch.smoke import smoke_run
from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.evaluator.server.listeners import RunningEvaluator, serve
from ale_robotics.gateway import ModelUsage
from ale_robotics.harness.agent_proc import (
    AgentRun,
    AgentRunContext,
    Progress,
    latest_job,
    run_agent,
)
from ale_robotics.harness.errors import HarnessError
from ale_robotics.harness.evidence import gate_evidence, harness_evidence
from ale_robotics.harness.interrupt import RunInterrupted, StopRequest
from ale_robotics.harness.model_gateway import ModelSettings, model_gateway
from ale_robotics.harness.options import (
    RunOptions,
    check_label,
    default_label,
    default_state_dir,
    new_run_id,
)
from ale_robotics.harness.plots.canvas import import_matplotlib
from ale_robotics.harness.preflight import check_agent_command, check_options, make_run_dir
from ale_robotics.harness.report import (
    PlotsDrawing,
    RunReport,
    StoppedRunReport,
    start_report,
    write_stopped,
)
from ale_robotics.harness.task_config import submit_agent_copy, write_agent_copy
from ale_robotics.model.result import EvalResult
from ale_robotics.sandboxes import resolve_sandbox
from ale_robotics.sandboxes.run_dirs import DirKind, new_private_dirs
from ale_robotics.scoring import score
from ale_robotics.tasks.packet import build_task_packet, remove_task_packet
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import SignedEvaluatorEvent, TrajectoryWriter
from ale_robotics.v1 import ale_env_pb2 as pb

if TYPE_CHECKING:
    from ale_robotics.sandboxes.docker.evaluator import EvaluatorContainer

__all__ = [
    "HarnessError",
    "Progress",
    "RunInterruptedError",
    "RunOptions",
    "RunOutcome",
    "default_state_dir",
    "new_run_id",
    "run_task",
]


logger = logging.getLogger(__name__)


class RunInterruptedError(AleError):
    """The operator stopped the run (Ctrl-C, SIGTERM): nothing was scored.

    Raised by :func:`run_task` after the clean-up: the agent stopped, the run's
    unfinished jobs cancelled, a ``run_interrupted`` event closing the trajectory and
    ``result.json`` written with state ``interrupted``.
    """

    def __init__(self, message: str, *, signal_name: str, run_id: str, run_dir: Path) -> None:
        super().__init__(message)
        self.signal_name = signal_name
        self.run_id = run_id
        self.run_dir = run_dir


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    report: RunReport
    score_line: str
    agent_log_tail: list[str] = dataclasses.field(default_factory=list)
    """The last lines of ``agent.log`` when the agent exited with an error (a crash to
    look at), else empty."""


Started = Callable[[str, Path], None]
"""(run_id, run_dir) -> None: called once the run directory exists, before the agent."""

LOG_TAIL_LINES = 10

_RESULT_POLL_S = 0.25
"""The longest interval between two status polls while the harness waits for a result."""


@dataclass
class _Phase:
    """Where the run is, for a ``run_interrupted`` event and an interrupted result.json."""

    name: str = "setup"
    agent_exit_code: int | None = None
    cancel: Callable[[], list[str]] | None = None
    """Cancels the run's unfinished jobs on its evaluator; set once one is connected."""
    ahead: Callable[[], None] | None = None
    """Starts the embedded evaluator's workers (:func:`_prestart_workers`), when there is one."""
    plots: PlotsDrawing | None = None
    """The report's plots being drawn, once result.json is written (see :func:`run_task`)."""

    def set(self, name: str) -> None:
        self.name = name

    def wait_for_plots(self) -> None:
        if self.plots is not None:
            self.plots.wait()


@dataclass(frozen=True)
class _RunContext(AgentRunContext):
    """One run's fixed facts and its mutable phase, passed to every step of the run."""

    registry: Registry = dataclasses.field(default_factory=default_registry)
    phase: _Phase = dataclasses.field(default_factory=lambda: _Phase())
    label: str = ""
    """The run's label (--label, else the agent command's default), for every report."""
    started_at: dt.datetime | None = None
    """When the run started (UTC), for every report: runs are compared and ordered by it."""
    executor: LocalExecutor | None = None
    """The embedded evaluator's executor, made and started before this run (see
    :mod:`.prestart`); None: the evaluator makes its own."""


def run_task(
    opts: RunOptions,
    *,
    registry: Registry | None = None,
    on_progress: Progress | None = None,
    on_start: Started | None = None,
    stop: StopRequest | None = None,
    executor: LocalExecutor | None = None,
) -> RunOutcome:
    """Run ``opts.agent_cmd`` on ``opts.task_id`` to a verdict.

    ``executor``: for an embedded evaluator, the local executor it is to use, its
    workers already starting (:func:`.prestart.prestarted_executor`); the evaluator
    owns it once it is up, and the caller shuts it down in case the run ended before
    (shutting it down twice is harmless). Ignored by a run on another evaluator.

    Raises :class:`~ale_robotics.errors.InvalidArgumentError` for options that cannot
    work (checked before anything is created), :class:`HarnessError` when the
    infrastructure fails (``result.json`` says ``failed``), and
    :class:`RunInterruptedError` when ``stop`` is requested or Ctrl-C arrives
    (``result.json`` says ``interrupted``).
    """
    reg = registry or default_registry()
    stop = stop or StopRequest()
    entry = reg.entry(opts.task_id)
    task = entry.spec
    manifest_entry = reg.manifest_entry(task.id)
    target = reg.target(task.id)
    budget = opts.budget_s or (
        manifest_entry.compute_budget.wall_clock_s if manifest_entry else 3600.0
    )
    check_options(opts, task)
    # Resolved once ("auto" becomes what this host can do); the agent phase uses it.
    sandbox = resolve_sandbox(opts.sandbox, agent_image=opts.agent_image)
    if opts.model_upstream is not None and not sandbox.serves_model_gateway:
        raise InvalidArgumentError(
            f"the model gateway cannot reach an agent in --sandbox {sandbox.name}: "
            "use bwrap, docker or none"
        )
    workspace = (opts.workspace or Path.cwd()).resolve()
    check_agent_command(opts, workspace, sandbox)
    label = check_label(opts.label) if opts.label is not None else default_label(opts.agent_cmd)
    started_at = dt.datetime.now(dt.UTC)
    run_id = opts.run_id or new_run_id()
    run_dir = (opts.run_dir or (opts.runs_root or Path("runs")) / run_id).resolve()
    submission = (opts.submission_volume or run_dir / "submission").resolve()
    # Recorded before they exist (hidden from every later agent, wherever they are), and
    # refused if an agent sandboxed already would see them (sandboxes/run_dirs.py).
    with new_private_dirs(_private_dirs(opts, run_dir, submission)):
        run_dir = make_run_dir(run_dir)
        submission.mkdir(parents=True, exist_ok=True)
        if opts.state_dir is not None and opts.evaluator is None:
            opts.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    traj = TrajectoryWriter(run_dir / "trajectory.jsonl", run_id)
    traj.append(
        "harness",
        "run_started",
        {
            "task_id": task.id,
            "task_config_sha256": entry.sha256,
            "agent_cmd": opts.agent_cmd,
            "label": label,
            "started_at": started_at.isoformat().replace("+00:00", "Z"),
            "budget_s": budget,
            "target": target.model_dump(mode="json") if target else None,
            "sandbox": sandbox.name,
            **({} if opts.episodes is None else {"smoke_episodes": opts.episodes}),
        },
    )
    ctx = _RunContext(
        opts=opts,
        task=task,
        manifest_entry=manifest_entry,
        run_id=run_id,
        run_dir=run_dir,
        submission=submission,
        budget_s=budget,
        started=time.monotonic(),
        traj=traj,
        stop=stop,
        sandbox=sandbox,
        on_progress=on_progress,
        registry=reg,
        label=label,
        started_at=started_at,
        executor=executor,
    )
    if on_start is not None:
        on_start(run_id, run_dir)
    try:
        return _connect_and_drive(ctx)
    except KeyboardInterrupt as exc:  # RunInterrupted, or Ctrl-C with no handler installed
        signal_name = exc.signal_name if isinstance(exc, RunInterrupted) else "SIGINT"
        raise _record_interrupt(ctx, signal_name) from None
    except HarnessError as exc:
        _record_failure(ctx, exc.message)
        raise
    finally:
        # Drawn while the evaluator stopped (_report); the plots are there once the run
        # returns, whichever way it ends.
        ctx.phase.wait_for_plots()


def _private_dirs(opts: RunOptions, run_dir: Path, submission: Path) -> list[tuple[Path, DirKind]]:
    """What this run makes that no other agent may see: its runs root (hidden whole),
    run dir, submission dir, and the state dir of an evaluator it starts."""
    dirs: list[tuple[Path, DirKind]] = [(run_dir, "run"), (submission, "submission")]
    if opts.run_dir is None:
        dirs.insert(0, (run_dir.parent, "root"))
    if opts.state_dir is not None and opts.evaluator is None:
        dirs.append((opts.state_dir, "state"))
    return dirs


def _connect_and_drive(ctx: _RunContext) -> RunOutcome:
    """Start (or connect to) the evaluator, run the agent, score; stop the evaluator."""
    opts, run_id, phase = ctx.opts, ctx.run_id, ctx.phase
    sock_dir: tempfile.TemporaryDirectory[str] | None = None
    running: RunningEvaluator | None = None
    container: EvaluatorContainer | None = None
    try:
        if opts.evaluator_image is not None:
            # The evaluator in a container of its own, its harness channel through
            # `docker exec` of the loopback client (the docker extra's other half,
            # sandboxes/docker/evaluator.py, imported for such a run only).
            from ale_robotics.sandboxes.docker.evaluator import EvaluatorContainer

            container = EvaluatorContainer.start(
                opts.evaluator_image,
                run_id=run_id,
                task_id=ctx.task.id,
                state_dir=opts.state_dir or default_state_dir(),
                submission=ctx.submission,
                run_dir=ctx.run_dir,
                workers=opts.workers,
            )
            agent_endpoint, agent_token = container.agent_address, container.agent_token
            harness = container.harness_client(run_id)
            ev = container  # a client of its own: `harness` is closed by the time it cancels
            phase.cancel = lambda: _close_remote_run_with(ev.harness_client(run_id), run_id)
        elif opts.evaluator is None:
            sock_dir = tempfile.TemporaryDirectory(prefix="ale-")
            running = serve(
                EvaluatorConfig(
                    opts.state_dir or default_state_dir(),
                    ctx.submission,
                    task_id=ctx.task.id,
                    run_id=run_id,
                    workers=opts.workers,
                    job_deadline_s=opts.job_timeout_s,
                    smoke_episodes=opts.episodes,
                    executor=opts.executor,
                    ray_address=opts.ray_address,
                ),
                # The agent socket gets a directory of its own: the sandbox binds
                # that whole directory, which must not hold the harness socket.
                agent_listen=f"unix://{sock_dir.name}/agent/agent.sock",
                harness_listen=f"unix://{sock_dir.name}/harness.sock",
                registry=ctx.registry,
                executor=ctx.executor,
            )
            embedded = running.evaluator
            phase.cancel = lambda: embedded.cancel_run(run_id, "the run was interrupted")
            phase.ahead = lambda: _prestart_workers(embedded, ctx.task.id)
            agent_endpoint, agent_token = running.agent_address, running.agent_token
            harness = AleClient(running.harness_address, running.harness_token, run_id=run_id)
        else:
            agent_endpoint = opts.evaluator
            harness, agent_token, submission = _connect_remote(
                opts, ctx.task.id, run_id, ctx.submission
            )
            ctx = dataclasses.replace(ctx, submission=submission)
            phase.cancel = lambda: _close_remote_run(harness, run_id)
        ctx.stop.check()
        with harness:
            return _drive(ctx, harness, agent_endpoint, agent_token)
    except KeyboardInterrupt:
        # Cancel while the evaluator is still up: its runner stops the job it runs.
        if phase.cancel is not None:
            cancel, phase.cancel = phase.cancel, None
            try:
                cancelled = cancel()
            except (AleError, OSError) as exc:
                logger.warning("could not cancel the run's jobs: %s", exc)
                cancelled = []
            phase.cancel = lambda: cancelled  # what was cancelled, for the record
        raise
    finally:
        if running is not None:
            running.stop()
        if container is not None:
            container.stop()
        if sock_dir is not None:
            sock_dir.cleanup()


def _prestart_workers(embedded: Evaluator, task_id: str) -> None:
    """Start the embedded evaluator's rollout workers now, while the agent starts.

    A cold worker takes a few tenths of a second (interpreter, imports, the first
    env), which would otherwise delay the evaluation of the agent's submission:
    started here, it overlaps the agent's own start-up (see
    :meth:`.LocalExecutor.prestart`). The task is the one the evaluator runs (a
    smoke run's is cut to its episodes).
    """
    if isinstance(embedded.pool, LocalExecutor):
        embedded.pool.prestart(embedded.tasks.spec(task_id))


def _connect_remote(
    opts: RunOptions, task_id: str, run_id: str, submission: Path
) -> tuple[AleClient, str, Path]:
    """The harness client, the agent's token and its submission dir on a separate evaluator."""
    assert opts.evaluator is not None
    token_file = opts.harness_token_file or _default_harness_token(opts)
    if token_file is None:
        raise HarnessError(
            "--evaluator needs --harness-token-file (the evaluator writes harness.token in "
            "its state dir; pass --state-dir if it is not the default one)"
        )
    from ale_robotics.sandboxes.docker.evaluator import harness_client

    agent_endpoint = opts.evaluator
    harness_addr = opts.evaluator_harness or _default_harness_address(agent_endpoint)
    harness = harness_client(  # a docker-exec:// address: through an evaluator container
        harness_addr, token_file.read_text().strip(), task_id=task_id, run_id=run_id
    )
    try:
        shared = "open_run" in harness.get_spec().raw.capabilities
        if shared:
            # A shared evaluator: this run gets a token and a new, empty directory
            # VOLUME/<run_id>/ of its own; the client closes the run (revoking the
            # token) when it is closed. --agent-token-file is not needed: the shared
            # agent.token reaches no run. --submission-dir, if given, is the volume
            # root as this host mounts it.
            grant = harness.open_run(run_id, task_id)
            agent_token = grant.agent_token
            if grant.submission_dir:
                submission = (
                    opts.submission_volume / grant.submission_subdir
                    if opts.submission_volume is not None
                    else Path(grant.submission_dir)
                ).resolve()
        elif opts.agent_token_file is None:
            raise HarnessError(
                "this evaluator serves one run (--run-id): --evaluator needs "
                "--agent-token-file and --submission-dir too (its run's token, "
                "STATE_DIR/run-tokens/RUN_ID.agent.token unless it was given one, and its "
                "volume); a shared one (no --run-id) needs neither"
            )
        else:
            agent_token = opts.agent_token_file.read_text().strip()
    except BaseException:
        harness.close()
        raise
    return harness, agent_token, submission


def _default_harness_address(agent_endpoint: str) -> str:
    """``evaluator serve``'s harness socket next to its agent socket's directory.

    Its defaults are ``STATE_DIR/agent/agent.sock`` and ``STATE_DIR/harness.sock``;
    anything else (a TCP address) serves both channels on the one given address
    unless ``--evaluator-harness`` says otherwise.
    """
    if agent_endpoint.startswith("unix://"):
        sock = Path(agent_endpoint.removeprefix("unix://"))
        for candidate in (sock.parent.parent / "harness.sock", sock.parent / "harness.sock"):
            if candidate.exists():
                return f"unix://{candidate}"
    return agent_endpoint


def _default_harness_token(opts: RunOptions) -> Path | None:
    """``harness.token`` of the evaluator's state dir: the one next to its agent socket
    (``evaluator serve``'s default layout), else ``--state-dir``, else the default."""
    assert opts.evaluator is not None
    candidates = []
    if opts.evaluator.startswith("unix://"):
        sock = Path(opts.evaluator.removeprefix("unix://"))
        candidates += [sock.parent.parent / "harness.token", sock.parent / "harness.token"]
    candidates.append((opts.state_dir or default_state_dir()) / "harness.token")
    return next((c for c in candidates if c.is_file()), None)


def _close_remote_run_with(harness: AleClient, run_id: str) -> list[str]:
    """:func:`_close_remote_run` on a client of its own, closed afterwards."""
    with harness:
        return _close_remote_run(harness, run_id)


def _close_remote_run(harness: AleClient, run_id: str) -> list[str]:
    """Close the run on a separate evaluator: its unfinished jobs are cancelled."""
    job = latest_job(harness)  # a run's jobs run in order: only its newest can be unfinished
    r = harness._call(harness.stub.CloseRun, pb.CloseRunRequest(run_id=run_id), retries=1)
    if r.jobs_cancelled and job is not None and not job.terminal:
        return [job.job_id]
    return [f"(unnamed job {i + 1})" for i in range(r.jobs_cancelled)]


def _record_interrupt(ctx: _RunContext, signal_name: str) -> RunInterruptedError:
    """Close the trajectory and write result.json for a run the operator stopped."""
    phase = ctx.phase
    cancelled = phase.cancel() if phase.cancel is not None else []
    reason = f"interrupted by {signal_name} during the {_PHASE_WORDS[phase.name]}"
    wall = ctx.elapsed()
    last = ctx.traj.append(
        "harness",
        "run_interrupted",
        {
            "signal": signal_name,
            "phase": phase.name,
            "cancelled_jobs": cancelled,
            "agent_exit_code": phase.agent_exit_code,
            "elapsed_s": round(wall, 3),
        },
    )
    write_stopped(
        ctx.run_dir,
        StoppedRunReport(
            state="interrupted",
            run_id=ctx.run_id,
            task_id=ctx.task.id,
            agent_cmd=ctx.opts.agent_cmd,
            reason=reason,
            signal=signal_name,
            phase=phase.name,
            cancelled_jobs=cancelled,
            agent_exit_code=phase.agent_exit_code,
            wall_s=wall,
            trajectory_head=last.hash,
            label=ctx.label,
            started_at=ctx.started_at,
            ended_at=dt.datetime.now(dt.UTC),
        ),
        ctx.traj.path,
    )
    jobs = f"; {len(cancelled)} unfinished job(s) cancelled" if cancelled else ""
    return RunInterruptedError(
        f"run {ctx.run_id} {reason}: the agent was stopped{jobs}; nothing was scored",
        signal_name=signal_name,
        run_id=ctx.run_id,
        run_dir=ctx.run_dir,
    )


_PHASE_WORDS = {
    "setup": "setup (before the agent started)",
    "agent": "agent phase",
    "evaluating": "evaluation (the agent had finished)",
    "scoring": "scoring",
}


def _record_failure(ctx: _RunContext, reason: str) -> None:
    """Close the trajectory and write result.json for a run the infrastructure failed."""
    phase = ctx.phase
    last = ctx.traj.append("harness", "run_failed", {"reason": reason, "phase": phase.name})
    write_stopped(
        ctx.run_dir,
        StoppedRunReport(
            state="failed",
            run_id=ctx.run_id,
            task_id=ctx.task.id,
            agent_cmd=ctx.opts.agent_cmd,
            reason=reason,
            phase=phase.name,
            agent_exit_code=phase.agent_exit_code,
            wall_s=ctx.elapsed(),
            trajectory_head=last.hash,
            label=ctx.label,
            started_at=ctx.started_at,
            ended_at=dt.datetime.now(dt.UTC),
        ),
        ctx.traj.path,
    )


def _drive(
    ctx: _RunContext, harness: AleClient, agent_endpoint: str, agent_token: str
) -> RunOutcome:
    """The run once an evaluator is connected: agent phase, evaluation, score, report."""
    ctx.stop.check()
    write_agent_copy(ctx.task, ctx.submission)  # task_config tasks: the copy the agent edits

    def started() -> None:
        # Once the agent is launched, not before: its start comes first. Both only
        # start threads; one that cannot start (no semaphores, no threads left) costs
        # the run its head start, nothing else.
        ctx.phase.set("agent")
        embedded = ctx.phase.ahead is not None  # set for an evaluator in this process only
        try:
            if ctx.phase.ahead is not None:
                ctx.phase.ahead()
            _prefetch(ctx.task, embedded=embedded)
        except (OSError, RuntimeError) as exc:
            logger.warning("could not start the evaluator's workers ahead of the job: %s", exc)

    agent, model_usage = _agent_phase(ctx, harness, agent_endpoint, agent_token, started)
    ctx.phase.agent_exit_code = agent.exit_code
    # The agent's own wall clock, as its budget counts it (frozen time excluded); the
    # evaluation that follows is not the agent's time.
    agent_wall_s = ctx.elapsed() - agent.frozen_s
    if ctx.task.offers_eval_sessions or ctx.task.offers_practice_sessions:
        _close_sessions(harness, ctx.run_id, ctx.traj)
    submit_agent_copy(harness, ctx.task, ctx.run_id, ctx.traj)  # task_config tasks: now
    ctx.phase.name = "evaluating"
    ctx.stop.check()
    result = _await_result(ctx, harness)
    ctx.phase.name = "scoring"
    ctx.stop.check()
    return _report(ctx, agent, result, agent_wall_s, model_usage)


TASK_PACKET_DIR = "task"
"""The run's task packet, in its run directory while the agent runs (removed after)."""


def _agent_phase(
    ctx: _RunContext,
    harness: AleClient,
    agent_endpoint: str,
    agent_token: str,
    started: Callable[[], None],
) -> tuple[AgentRun, ModelUsage | None]:
    """The agent's run with its task packet (``ALE_TASK_DIR``) and, given an upstream, the
    run's model gateway; what the agent used of its model (None: no gateway).

    The packet is built in the run directory (hidden from every other agent, not writable
    by this one: its sandbox binds it read-only) and removed once the agent ended.
    """
    opts = ctx.opts
    task_dir = ctx.run_dir / TASK_PACKET_DIR
    try:
        build_task_packet(
            ctx.task, opts.state_dir or default_state_dir(), task_dir, entry=ctx.manifest_entry
        )
    except (AleError, OSError) as exc:
        raise HarnessError(f"cannot build the task packet in {task_dir}: {exc}") from None
    try:
        if opts.model_upstream is None:
            agent = run_agent(
                ctx, harness, agent_endpoint, agent_token, on_started=started, task_dir=task_dir
            )
            return agent, None
        settings = ModelSettings(
            upstream=opts.model_upstream,
            models=tuple(opts.models),
            budget_tokens=opts.model_budget_tokens,
        )
        budget = ctx.manifest_entry.compute_budget if ctx.manifest_entry is not None else None
        with model_gateway(
            settings,
            run_dir=ctx.run_dir,
            trajectory=ctx.traj,
            task_budget=budget.model_tokens if budget is not None else None,
            isolated_network=ctx.sandbox.isolates,
        ) as access:
            agent = run_agent(
                ctx,
                harness,
                agent_endpoint,
                agent_token,
                on_started=started,
                task_dir=task_dir,
                model=access,
            )
        return agent, access.usage
    finally:
        remove_task_packet(task_dir)


def _prefetch(task: TaskSpec, *, embedded: bool) -> threading.Thread:
    """Do on a daemon thread, while the agent starts, what this process does later anyway.

    First, for an embedded evaluator, build and close one env of the task: the
    agent's first call, GetSpec, builds one for the task's spaces, and the first
    one in a process imports the simulator (MuJoCo, its OpenGL module, the env's
    module: a few tenths of a second the agent would wait for); then the imports of
    the report's plots (:func:`.plots.canvas.import_matplotlib`). Nothing here can fail the
    run: whatever fails is done again, and reported, where it is needed.
    """

    def load() -> None:
        if embedded:
            try:
                make_env(task.env, time_limit=False).close()
            except Exception as exc:  # GetSpec builds it again and reports the error
                logger.debug("env not built ahead of GetSpec: %s", exc)
        import_matplotlib()

    thread = threading.Thread(target=load, name="ale-harness-prefetch", daemon=True)
    thread.start()
    return thread


def _await_result(ctx: _RunContext, harness: AleClient) -> EvalResult | None:
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


def _read_result(ctx: _RunContext, harness: AleClient) -> EvalResult | None:
    """:func:`_await_result` while the evaluator answers."""
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
    result = EvalResult.model_validate_json(r.eval_result_json)
    for event in result.events:
        ctx.traj.append_signed(SignedEvaluatorEvent.model_validate(event))
    if result.failure_source == "infrastructure":
        raise HarnessError(
            f"the evaluator failed for infrastructure reasons ({result.state}): "
            f"{result.failure_reason}; this is not the agent's score, re-run it"
        )
    return result


def _report(
    ctx: _RunContext,
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
    target = ctx.registry.target(task.id)
    usage = agent.usage
    measured = harness_evidence(
        agent_wall_s=agent_wall_s,
        run_budget_s=ctx.budget_s,
        agent_cpu_s=usage.cpu_s if usage is not None else None,
        manifest_entry=ctx.manifest_entry,
    )
    if result is not None and result.state == "SUCCEEDED":
        with tempfile.TemporaryDirectory(prefix="ale-evidence-") as tmp:
            evidence = gate_evidence(result, Path(tmp), task=task, harness=measured)
            report = score(task, result.metrics, target, evidence)
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
    smoke = None if opts.episodes is None else smoke_run(task, opts.episodes)
    line = report.score_line()
    if smoke is not None:
        what = f"a smoke run of {smoke.episodes} of {smoke.of} episodes (--episodes)"
        report = report.model_copy(
            update={"explanation": f"This is {what}, not an official result. {report.explanation}"}
        )
        line += f" [smoke run: {smoke.episodes} of {smoke.of} episodes, not official]"
    if model_usage is not None:
        line += f" [{model_usage.summary()}]"
    run_report = RunReport(
        run_id=ctx.run_id,
        task_id=task.id,
        agent_cmd=opts.agent_cmd,
        agent_exit_code=agent.exit_code,
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
        started_at=ctx.started_at,
        ended_at=dt.datetime.now(dt.UTC),
    )
    last = ctx.traj.append(
        "harness",
        "score",
        {"status": report.status, "score": report.score, "line": line},
    )
    # The plots are drawn while the evaluator stops; run_task waits for them (_Phase).
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


def _close_sessions(harness: AleClient, run_id: str, traj: TrajectoryWriter) -> None:
    """Close what the agent left open, so that an unfinished eval session is recorded now."""
    r = harness._call(harness.stub.CloseSession, pb.CloseSessionRequest(run_id=run_id))
    if r.sessions_closed:
        traj.append("harness", "sessions_closed", {"count": r.sessions_closed})


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
