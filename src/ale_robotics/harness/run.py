"""``ale-robotics run``: one run of one agent on one task, start to verdict.

The harness is trusted: it creates the run id and directories, starts (or
connects to) the evaluator, launches the agent with only the agent channel's
endpoint and token, enforces the wall-clock budget, then reads the official
result on the harness channel, scores it and writes the report. The agent never
gets the harness token, the evaluator state dir or the result.

This module drives the run; its other parts are modules of their own: the context
every step reads (:mod:`.run_context`), a separate evaluator (:mod:`.remote.evaluator`),
the result awaited and scored (:mod:`.verdict`), and a run stopped without a score
(:mod:`.stopped_run`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.client.sdk import AleClient
from ale_robotics.envs.make import make_env
from ale_robotics.errors import AleError
from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.evaluator.server.listeners import RunningEvaluator, serve
from ale_robotics.gateway import ModelUsage
from ale_robotics.harness.agent.access import AgentAccess
from ale_robotics.harness.agent.context import AgentRun, Progress
from ale_robotics.harness.agent.model_gateway import ModelAccess, ModelSettings, model_gateway
from ale_robotics.harness.agent.proc import run_agent
from ale_robotics.harness.interrupt import RunInterrupted, StopRequest
from ale_robotics.harness.options import (
    RunOptions,
    check_label,
    default_label,
    default_state_dir,
    new_run_id,
)
from ale_robotics.harness.options.agent import agent_env_pairs
from ale_robotics.harness.plots.canvas import import_matplotlib
from ale_robotics.harness.preflight import check_run, make_run_dir
from ale_robotics.harness.remote.evaluator import (
    close_remote_run_with,
    connect_remote_run,
    open_relays,
)
from ale_robotics.harness.report import InspectRecord
from ale_robotics.harness.run_context import RunContext
from ale_robotics.harness.run_lock import held_by_harness
from ale_robotics.harness.stopped_run import record_failure, record_interrupt
from ale_robotics.harness.task_config import submit_agent_copy, write_agent_copy
from ale_robotics.harness.verdict import RunOutcome, await_result, score_run
from ale_robotics.harness.videos import fetch_videos
from ale_robotics.sandboxes import Sandbox
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.sandboxes.run_dirs import DirKind, new_private_dirs
from ale_robotics.tasks.packet import build_task_packet, remove_task_packet
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import TrajectoryWriter
from ale_robotics.v1 import ale_env_pb2 as pb

if TYPE_CHECKING:
    from ale_robotics.sandboxes.docker.evaluator import EvaluatorContainer

__all__ = [
    "HarnessError",
    "Progress",
    "RunOptions",
    "default_state_dir",
    "new_run_id",
    "run_task",
]


logger = logging.getLogger(__name__)


Started = Callable[[str, Path], None]
"""(run_id, run_dir) -> None: called once the run directory exists, before the agent."""


def run_task(
    opts: RunOptions,
    *,
    registry: Registry | None = None,
    on_progress: Progress | None = None,
    on_start: Started | None = None,
    stop: StopRequest | None = None,
    executor: LocalExecutor | None = None,
    agent_access: AgentAccess | None = None,
    inspect: InspectRecord | None = None,
    checked: Sandbox | None = None,
    model_usage: Callable[[], ModelUsage | None] | None = None,
) -> RunOutcome:
    """Run ``opts.agent_cmd`` on ``opts.task_id`` to a verdict.

    ``executor``: for an embedded evaluator, the local executor it is to use, its
    workers already starting (:func:`.prestart.prestarted_executor`); the evaluator
    owns it once it is up, and the caller shuts it down in case the run ended before
    (shutting it down twice is harmless). Ignored by a run on another evaluator.

    ``agent_access``: a service of the caller the agent reaches through its sandbox
    (an Inspect sample's toolbox channel, :mod:`ale_robotics.inspect`); not with a model
    gateway (``--model-upstream``). ``inspect``: the Inspect sample that drives the
    agent, recorded in ``result.json``. ``checked``: the sandbox
    :func:`.preflight.check_run` returned for these options, when the caller ran it
    (the command line does, before it imports this module); else it runs here.
    ``model_usage``: the caller's account of the agent's model use (an Inspect sample's),
    read once the agent phase ended, for ``result.json``.

    Raises :class:`~ale_robotics.errors.InvalidArgumentError` for options that cannot
    work (checked before anything is created), :class:`HarnessError` when the
    infrastructure fails (``result.json`` says ``failed``), and
    :class:`.stopped_run.RunInterruptedError` when ``stop`` is requested or Ctrl-C
    arrives (``result.json`` says ``interrupted``).
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
    # Every check before anything is made; the sandbox is resolved once ("auto" becomes
    # what this host can do), and the agent phase uses it.
    sandbox = checked if checked is not None else check_run(opts, task, agent_access)
    # Stopped before anything is made: nothing to record (the caller says so).
    stop.check()
    label = check_label(opts.label) if opts.label is not None else default_label(opts.agent_cmd)
    started_at = dt.datetime.now(dt.UTC)
    run_id = opts.run_id or new_run_id()
    run_dir = (opts.run_dir or (opts.runs_root or Path("runs")) / run_id).resolve()
    submission = (opts.submission_volume or run_dir / "submission").resolve()
    # Recorded before they exist (hidden from every later agent, wherever they are), and
    # refused if an agent sandboxed already would see them (sandboxes/run_dirs.py).
    with contextlib.ExitStack() as lock:  # released once the run is recorded (or it dies)
        with new_private_dirs(_private_dirs(opts, run_dir, submission)):
            run_dir = make_run_dir(run_dir)
            lock.enter_context(held_by_harness(run_dir))  # "lost" in runs list once it dies
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
                **({"agent_tools": [str(p) for p in opts.agent_tools]} if opts.agent_tools else {}),
                **({"agent_env": agent_env_pairs(opts)} if opts.agent_env else {}),
            },
        )
        ctx = RunContext(
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
            agent_access=agent_access,
            inspect=inspect,
            model_usage=model_usage,
        )
        if on_start is not None:
            on_start(run_id, run_dir)
        return _recorded(ctx)


def _recorded(ctx: RunContext) -> RunOutcome:
    """The run from its context to its verdict, whichever way it ends, recorded: a run
    interrupted or failed gets ``result.json`` saying why (:mod:`.stopped_run`)."""
    try:
        return _connect_and_drive(ctx)
    except KeyboardInterrupt as exc:  # RunInterrupted, or Ctrl-C with no handler installed
        signal_name = exc.signal_name if isinstance(exc, RunInterrupted) else "SIGINT"
        raise record_interrupt(ctx, signal_name) from None
    except HarnessError as exc:
        record_failure(ctx, exc.message)
        raise
    except AleError as exc:  # an evaluator call failed for good: not the agent's doing
        reason = (
            f"the evaluator failed the run ({exc.code.name}: {exc.message}); this is not the "
            "agent's score, re-run it"
        )
        record_failure(ctx, reason)
        raise HarnessError(reason) from None
    except Exception as exc:  # a fault of the harness itself: the run still gets its record
        record_failure(ctx, f"internal error in the harness: {type(exc).__name__}: {exc}")
        raise
    finally:
        # Drawn while the evaluator stopped (score_run); the plots are there once the run
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


def _connect_and_drive(ctx: RunContext) -> RunOutcome:
    """Start (or connect to) the evaluator, run the agent, score; stop the evaluator."""
    opts, run_id, phase = ctx.opts, ctx.run_id, ctx.phase
    sock_dir: tempfile.TemporaryDirectory[str] | None = None
    running: RunningEvaluator | None = None
    container: EvaluatorContainer | None = None
    relays = None
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
            phase.cancel = lambda: close_remote_run_with(ev.harness_client(run_id), run_id)
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
                    video_episodes=opts.video_episodes,
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
            relays = open_relays(opts)  # on TCP: both channels relayed, over TLS
            ctx, harness, agent_endpoint, agent_token = connect_remote_run(ctx, relays)
        ctx.stop.check()
        harness.retry_window_s = opts.evaluator_retry_s
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
        if relays is not None:
            relays.close()


def _prestart_workers(embedded: Evaluator, task_id: str) -> None:
    """Start the embedded evaluator's rollout workers now, while the agent starts.

    A cold worker takes a few tenths of a second (interpreter, imports, the first
    env), which would otherwise delay the evaluation of the agent's submission:
    started here, it overlaps the agent's own start-up (see
    :meth:`.LocalExecutor.prestart`; a Ray executor warms its workers up the same way,
    :meth:`.RayExecutor.prestart`). The task is the one the evaluator runs (a smoke run's
    is cut to its episodes).
    """
    embedded.pool.prestart(embedded.tasks.spec(task_id))  # Ray: its workers warmed up


def _drive(
    ctx: RunContext, harness: AleClient, agent_endpoint: str, agent_token: str
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
    result = await_result(ctx, harness)
    ctx.phase.name = "scoring"
    ctx.stop.check()
    outcome = score_run(ctx, agent, result, agent_wall_s, model_usage)
    if result is not None and result.state == "SUCCEEDED" and ctx.opts.video_episodes:
        ctx.phase.name = "videos"  # result.json is written: nothing below changes the score
        try:
            fetch_videos(harness, ctx.run_dir, result.job_id, ctx.opts.video_episodes)
        except KeyboardInterrupt:  # the score stands; only the videos are cut short
            logger.warning("videos interrupted; the run's result is complete")
    return outcome


TASK_PACKET_DIR = "task"
"""The run's task packet, in its run directory while the agent runs (removed after)."""


def _agent_phase(
    ctx: RunContext,
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
        with _agent_access(ctx) as (access, gateway):
            agent = run_agent(
                ctx,
                harness,
                agent_endpoint,
                agent_token,
                on_started=started,
                task_dir=task_dir,
                access=access,
            )
        if gateway is not None:
            return agent, gateway.usage
        return agent, ctx.model_usage() if ctx.model_usage is not None else None
    finally:
        remove_task_packet(task_dir)


@contextlib.contextmanager
def _agent_access(
    ctx: RunContext,
) -> Iterator[tuple[AgentAccess | None, ModelAccess | None]]:
    """What the agent reaches through its sandbox besides the evaluator, for the agent's
    run: the run's model gateway, given an upstream (its account is read once the block
    ended), else the caller's service (an Inspect sample's toolbox channel), if any."""
    opts = ctx.opts
    if opts.model_upstream is None:
        yield ctx.agent_access, None
        return
    settings = ModelSettings(
        upstream=opts.model_upstream,
        models=tuple(opts.models),
        budget_tokens=opts.model_budget_tokens,
        allowed_tools=tuple(opts.model_allow_tools),
    )
    budget = ctx.manifest_entry.compute_budget if ctx.manifest_entry is not None else None
    with model_gateway(
        settings,
        run_dir=ctx.run_dir,
        trajectory=ctx.traj,
        task_budget=budget.model_tokens if budget is not None else None,
        isolated_network=ctx.sandbox.isolates,
        quota_bytes=opts.disk_quota_bytes,
    ) as access:
        yield access, access


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


def _close_sessions(harness: AleClient, run_id: str, traj: TrajectoryWriter) -> None:
    """Close what the agent left open, so that an unfinished eval session is recorded now."""
    r = harness._call(harness.stub.CloseSession, pb.CloseSessionRequest(run_id=run_id))
    if r.sessions_closed:
        traj.append("harness", "sessions_closed", {"count": r.sessions_closed})
