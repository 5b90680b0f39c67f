"""``ale-robotics run``: one run of one agent on one task, start to verdict.

The harness is trusted: it creates the run id and directories, starts (or
connects to) the evaluator, launches the agent with only the agent channel's
endpoint and token, enforces the wall-clock budget, then reads the official
result on the harness channel, scores it and writes the report. The agent never
gets the harness token, the evaluator state dir or the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ale_robotics.client.sdk import AleClient, JobStatus
from ale_robotics.errors import (
    AleError,
    FailedPreconditionError,
    NotFoundError,
)
from ale_robotics.evaluator.core import EvaluatorConfig
from ale_robotics.evaluator.metrics import HOST_TIMED
from ale_robotics.evaluator.result import EvalResult
from ale_robotics.evaluator.server import RunningEvaluator, serve
from ale_robotics.evaluator.smoke import smoke_run
from ale_robotics.harness.agent_io import LogPump, disk_usage, format_bytes, limited_argv
from ale_robotics.harness.cgroups import (
    CgroupsUnavailable,
    Limits,
    RunCgroup,
    Usage,
    create_run_cgroup,
)
from ale_robotics.harness.evidence import gate_evidence
from ale_robotics.harness.hidden_modules import sandbox_hidden_paths
from ale_robotics.harness.interrupt import RunInterrupted, StopRequest
from ale_robotics.harness.options import RunOptions, default_state_dir, new_run_id
from ale_robotics.harness.preflight import (
    check_agent_command,
    check_options,
    make_run_dir,
    workspace_argv,
)
from ale_robotics.harness.report import RunReport, StoppedRunReport, write_report, write_stopped
from ale_robotics.harness.run_dirs import known_run_dirs, record_run_dir
from ale_robotics.harness.sandbox import (
    bwrap_command,
    read_sandbox_status,
    require_sandbox,
    sandbox_available,
)
from ale_robotics.harness.task_config import submit_agent_copy, write_agent_copy
from ale_robotics.paths import state_home
from ale_robotics.scoring import score
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskMode
from ale_robotics.trajectory import SignedEvaluatorEvent, TrajectoryWriter
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = [
    "HarnessError",
    "RunInterruptedError",
    "RunOptions",
    "RunOutcome",
    "default_state_dir",
    "new_run_id",
    "run_task",
]


logger = logging.getLogger(__name__)


class HarnessError(AleError):
    """The run could not be completed (infrastructure, not the agent's score)."""


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


Progress = Callable[[str, JobStatus | None, float, float], None]
"""(phase, job status, elapsed, budget) -> None; the CLI draws it with rich."""

Started = Callable[[str, Path], None]
"""(run_id, run_dir) -> None: called once the run directory exists, before the agent."""

LOG_TAIL_LINES = 10


@dataclass
class _Phase:
    """Where the run is, for a ``run_interrupted`` event and an interrupted result.json."""

    name: str = "setup"
    agent_exit_code: int | None = None
    cancel: Callable[[], list[str]] | None = None
    """Cancels the run's unfinished jobs on its evaluator; set once one is connected."""


def _agent_env(
    endpoint: str,
    token: str,
    task_id: str,
    run_id: str,
    submission: Path,
    workspace: Path,
    scratch: Path,
) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        ALE_ENDPOINT=endpoint,
        ALE_TOKEN=token,
        ALE_TASK_ID=task_id,
        ALE_RUN_ID=run_id,
        ALE_SUBMISSION_DIR=str(submission),
        ALE_WORKSPACE=str(workspace),
        ALE_SCRATCH_DIR=str(scratch),
        PYTHONUNBUFFERED="1",
    )
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_task(
    opts: RunOptions,
    *,
    registry: Registry | None = None,
    on_progress: Progress | None = None,
    on_start: Started | None = None,
    stop: StopRequest | None = None,
) -> RunOutcome:
    """Run ``opts.agent_cmd`` on ``opts.task_id`` to a verdict.

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
    # Resolved once ("auto" becomes what this host can do); _drive reads opts.sandbox.
    opts = dataclasses.replace(opts, sandbox=_sandbox_mode(opts.sandbox))
    workspace = (opts.workspace or Path.cwd()).resolve()
    check_agent_command(opts, workspace)
    run_id = opts.run_id or new_run_id()
    run_dir = make_run_dir(opts.run_dir or (opts.runs_root or Path("runs")) / run_id)
    record_run_dir(run_dir)  # hidden from every later agent, wherever it is
    submission = (opts.submission_volume or run_dir / "submission").resolve()
    submission.mkdir(parents=True, exist_ok=True)
    traj = TrajectoryWriter(run_dir / "trajectory.jsonl", run_id)
    traj.append(
        "harness",
        "run_started",
        {
            "task_id": task.id,
            "task_config_sha256": entry.sha256,
            "agent_cmd": opts.agent_cmd,
            "budget_s": budget,
            "target": target.model_dump(mode="json") if target else None,
            "sandbox": opts.sandbox,
            **({} if opts.episodes is None else {"smoke_episodes": opts.episodes}),
        },
    )
    started = time.monotonic()
    phase = _Phase()
    if on_start is not None:
        on_start(run_id, run_dir)
    try:
        return _connect_and_drive(
            opts,
            task.id,
            run_id,
            run_dir,
            submission,
            budget,
            started,
            traj,
            reg,
            on_progress,
            stop,
            phase,
        )
    except KeyboardInterrupt as exc:  # RunInterrupted, or Ctrl-C with no handler installed
        signal_name = exc.signal_name if isinstance(exc, RunInterrupted) else "SIGINT"
        raise _record_interrupt(
            opts, task.id, run_id, run_dir, traj, started, phase, signal_name
        ) from None
    except HarnessError as exc:
        _record_failure(opts, task.id, run_id, run_dir, traj, started, phase, exc.message)
        raise


def _connect_and_drive(
    opts: RunOptions,
    task_id: str,
    run_id: str,
    run_dir: Path,
    submission: Path,
    budget: float,
    started: float,
    traj: TrajectoryWriter,
    reg: Registry,
    on_progress: Progress | None,
    stop: StopRequest,
    phase: _Phase,
) -> RunOutcome:
    """Start (or connect to) the evaluator, run the agent, score; stop the evaluator."""
    sock_dir: tempfile.TemporaryDirectory[str] | None = None
    running: RunningEvaluator | None = None
    try:
        if opts.evaluator is None:
            sock_dir = tempfile.TemporaryDirectory(prefix="ale-")
            running = serve(
                EvaluatorConfig(
                    opts.state_dir or default_state_dir(),
                    submission,
                    task_id=task_id,
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
                registry=reg,
            )
            embedded = running.evaluator
            phase.cancel = lambda: embedded.cancel_run(run_id, "the run was interrupted")
            agent_endpoint, agent_token = running.agent_address, running.agent_token
            harness = AleClient(running.harness_address, running.harness_token, run_id=run_id)
        else:
            agent_endpoint = opts.evaluator
            harness, agent_token, submission = _connect_remote(opts, task_id, run_id, submission)
            phase.cancel = lambda: _close_remote_run(harness, run_id)
        stop.check()
        with harness:
            return _drive(
                opts,
                task_id,
                run_id,
                run_dir,
                submission,
                budget,
                started,
                traj,
                harness,
                agent_endpoint,
                agent_token,
                reg,
                on_progress,
                stop,
                phase,
            )
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
        if sock_dir is not None:
            sock_dir.cleanup()


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
    agent_endpoint = opts.evaluator
    harness_addr = opts.evaluator_harness or _default_harness_address(agent_endpoint)
    harness = AleClient(
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
                "--agent-token-file and --submission-dir too (its agent.token and "
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


def _close_remote_run(harness: AleClient, run_id: str) -> list[str]:
    """Close the run on a separate evaluator: its unfinished jobs are cancelled."""
    job = _latest(harness)  # a run's jobs run in order: only its newest can be unfinished
    r = harness._call(harness.stub.CloseRun, pb.CloseRunRequest(run_id=run_id), retries=1)
    if r.jobs_cancelled and job is not None and not job.terminal:
        return [job.job_id]
    return [f"(unnamed job {i + 1})" for i in range(r.jobs_cancelled)]


def _record_interrupt(
    opts: RunOptions,
    task_id: str,
    run_id: str,
    run_dir: Path,
    traj: TrajectoryWriter,
    started: float,
    phase: _Phase,
    signal_name: str,
) -> RunInterruptedError:
    """Close the trajectory and write result.json for a run the operator stopped."""
    cancelled = phase.cancel() if phase.cancel is not None else []
    reason = f"interrupted by {signal_name} during the {_PHASE_WORDS[phase.name]}"
    wall = time.monotonic() - started
    last = traj.append(
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
        run_dir,
        StoppedRunReport(
            state="interrupted",
            run_id=run_id,
            task_id=task_id,
            agent_cmd=opts.agent_cmd,
            reason=reason,
            signal=signal_name,
            phase=phase.name,
            cancelled_jobs=cancelled,
            agent_exit_code=phase.agent_exit_code,
            wall_s=wall,
            trajectory_head=last.hash,
        ),
        traj.path,
    )
    jobs = f"; {len(cancelled)} unfinished job(s) cancelled" if cancelled else ""
    return RunInterruptedError(
        f"run {run_id} {reason}: the agent was stopped{jobs}; nothing was scored",
        signal_name=signal_name,
        run_id=run_id,
        run_dir=run_dir,
    )


_PHASE_WORDS = {
    "setup": "setup (before the agent started)",
    "agent": "agent phase",
    "evaluating": "evaluation (the agent had finished)",
    "scoring": "scoring",
}


def _record_failure(
    opts: RunOptions,
    task_id: str,
    run_id: str,
    run_dir: Path,
    traj: TrajectoryWriter,
    started: float,
    phase: _Phase,
    reason: str,
) -> None:
    """Close the trajectory and write result.json for a run the infrastructure failed."""
    last = traj.append("harness", "run_failed", {"reason": reason, "phase": phase.name})
    write_stopped(
        run_dir,
        StoppedRunReport(
            state="failed",
            run_id=run_id,
            task_id=task_id,
            agent_cmd=opts.agent_cmd,
            reason=reason,
            phase=phase.name,
            agent_exit_code=phase.agent_exit_code,
            wall_s=time.monotonic() - started,
            trajectory_head=last.hash,
        ),
        traj.path,
    )


def _drive(
    opts: RunOptions,
    task_id: str,
    run_id: str,
    run_dir: Path,
    submission: Path,
    budget: float,
    started: float,
    traj: TrajectoryWriter,
    harness: AleClient,
    agent_endpoint: str,
    agent_token: str,
    reg: Registry,
    on_progress: Progress | None,
    stop: StopRequest,
    phase: _Phase,
) -> RunOutcome:
    task = reg.get(task_id)
    workspace = (opts.workspace or Path.cwd()).resolve()
    stop.check()
    scratch = run_dir / "scratch"
    scratch.mkdir()
    env = _agent_env(agent_endpoint, agent_token, task_id, run_id, submission, workspace, scratch)
    write_agent_copy(task, submission)  # task_config tasks: the config copy the agent edits
    log_path = run_dir / "agent.log"
    argv = workspace_argv(shlex.split(opts.agent_cmd), workspace)
    status_r: int | None = None
    pass_fds: tuple[int, ...] = ()
    if opts.sandbox == "bwrap":
        if not agent_endpoint.startswith("unix://"):
            raise HarnessError(
                "the agent sandbox has no network: the evaluator's agent channel must be a "
                "Unix socket (unix://...), or run with --sandbox none"
            )
        if argv and argv[0] in ("python", "python3"):
            # Inside the sandbox only this project's interpreter and venv exist; a bare
            # "python" could resolve to a shim (pyenv) whose files are not there.
            argv[0] = sys.executable
        status_r, status_w = os.pipe()
        pass_fds = (status_w,)
        argv = bwrap_command(
            argv,
            workspace=workspace,
            scratch_dir=scratch,
            submission_dir=submission,
            agent_socket=Path(agent_endpoint.removeprefix("unix://")),
            hide=_hidden_paths(opts, run_dir, workspace),
            block_imports=sandbox_hidden_paths(task),  # e.g. metaworld.policies
            status_fd=status_w,
        )
    limits = _agent_limits(opts, reg.manifest_entry(task_id))
    cgroup, cgroup_warning = _run_cgroup(run_id, limits)
    traj.append(
        "harness",
        "agent_launched",
        {
            "cmd": opts.agent_cmd,
            "log": log_path.name,
            "sandbox": opts.sandbox,
            "disk_quota_bytes": opts.disk_quota_bytes,
            "cgroup": f"v{cgroup.version}" if cgroup is not None else "none",
            "limits": limits.as_dict(),
        },
    )
    # While a job of a task with host-timed metrics (planning_time) is queued or running,
    # the agent is frozen: even capped, a spinning agent competes with the planner for
    # cores, caches and memory bandwidth, so only a stopped agent leaves the measured
    # wall-clock times as a quiet host gives them (a cap would also have to be chosen per
    # host). Frozen time does not count against its budget. The harness polls the run's
    # newest job every 50 ms for these tasks and freezes from QUEUED on (a run's jobs run
    # in order, so a newest job not yet terminal covers the older ones): a job can start
    # at most one poll before the agent stops, while its planner workers are still
    # starting (about a second here, before the first timed problem).
    host_timed = any(m.name in HOST_TIMED for m in task.metrics)
    frozen_since: float | None = None
    frozen_s = 0.0
    frozen_job = ""

    def freeze(job: JobStatus) -> None:
        nonlocal frozen_since, frozen_job
        how = _freeze(cgroup, proc)
        frozen_since, frozen_job = time.monotonic(), job.job_id
        cpu = cgroup.cpu_s() if cgroup is not None else None
        traj.append(
            "harness",
            "agent_frozen",
            {"job_id": job.job_id, "job_state": job.state, "how": how, "cpu_s": cpu},
        )

    def thaw(job: JobStatus | None) -> None:
        nonlocal frozen_since, frozen_s
        if frozen_since is None:
            return
        cpu = cgroup.cpu_s() if cgroup is not None else None  # still frozen: what it got
        _thaw(cgroup, proc)
        spell = time.monotonic() - frozen_since
        frozen_s += spell
        frozen_since = None
        traj.append(
            "harness",
            "agent_thawed",
            {
                "job_id": frozen_job,
                "job_state": job.state if job is not None else None,
                "frozen_s": round(spell, 3),
                "cpu_s": cpu,
            },
        )

    quota_exceeded: int | None = None
    usage: Usage | None = None
    try:
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.Popen(
                    limited_argv(
                        argv,
                        opts.disk_quota_bytes,
                        cgroup.procs_files if cgroup is not None else (),
                    ),
                    cwd=scratch,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=pass_fds,
                )
            except OSError as exc:
                raise HarnessError(f"cannot start the agent command {argv[0]!r}: {exc}") from None
            finally:
                for fd in pass_fds:
                    os.close(fd)
            if cgroup is not None:
                # The launcher entered the cgroup itself before exec (no child escapes
                # that race); this write is the check that it could.
                try:
                    cgroup.join(proc.pid)
                except ProcessLookupError:
                    pass  # already gone: it started nothing that is still running
                except OSError as exc:
                    cgroup_warning = _warn_cgroup(
                        f"the agent could not be put in its cgroup ({exc})", uncapped=True
                    )
            assert proc.stdout is not None
            pump = LogPump(proc.stdout, log, opts.log_cap_bytes)
            timed_out = False
            next_disk_check = 0.0
            phase.name = "agent"
            try:
                while proc.poll() is None:
                    now = time.monotonic()
                    elapsed = now - started
                    agent_elapsed = (
                        elapsed - frozen_s - (0.0 if frozen_since is None else now - frozen_since)
                    )
                    if agent_elapsed > budget:
                        timed_out = True
                        thaw(None)
                        _kill_group(proc)
                        break
                    if elapsed >= next_disk_check:
                        next_disk_check = elapsed + 1.0
                        used = disk_usage([scratch, submission])
                        if used > opts.disk_quota_bytes:
                            quota_exceeded = used
                            thaw(None)
                            _kill_group(proc)
                            break
                    job = _latest(harness) if host_timed or on_progress is not None else None
                    if host_timed:
                        if job is not None and not job.terminal and frozen_since is None:
                            freeze(job)
                        elif (job is None or job.terminal) and frozen_since is not None:
                            thaw(job)
                    if cgroup is not None:
                        cgroup.sample()
                    if on_progress is not None:
                        on_progress("agent", job, agent_elapsed, budget)
                    stop.sleep(0.05 if host_timed else 0.2)
                else:
                    used = disk_usage([scratch, submission])
                    if used > opts.disk_quota_bytes:
                        quota_exceeded = used
            except BaseException:
                # Interrupted (or a bug): the agent must not outlive the harness. Thawed
                # first: a frozen process cannot act on SIGTERM.
                thaw(None)
                _kill_group(proc)
                if cgroup is not None:
                    cgroup.kill_all()
                pump.join()
                proc.stdout.close()
                raise
            thaw(None)
            # Whatever the agent left running in its process group (a background trainer)
            # ends with it; under bwrap its PID namespace ends too, and whatever is left in
            # its cgroup (a process that left the group: setsid) is killed there.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if cgroup is not None:
                cgroup.kill_all()
            pump.join()
            proc.stdout.close()
    finally:
        if cgroup is not None:
            usage = cgroup.close()
    exit_code = proc.returncode
    phase.agent_exit_code = exit_code
    oom_kills = (usage.oom_kills or 0) if usage is not None else 0
    if status_r is not None:
        status = read_sandbox_status(status_r)
        killed = timed_out or quota_exceeded is not None  # by the harness itself
        if not killed and not status.agent_ran:
            why = _last_bwrap_line(log_path)
            if oom_kills:
                why = f"killed at its {format_bytes(limits.memory_bytes or 0)} memory limit"
            elif "execvp" in why:
                # The command was checked on the host; inside, it is not there.
                raise HarnessError(
                    f"the agent command could not start inside the sandbox ({why}): the "
                    f"sandbox shows only the workspace {workspace} (read-only), the system "
                    "directories and this Python environment; put the command in the "
                    "workspace or give its full path"
                )
            raise HarnessError(
                f"the agent sandbox did not start ({why}); this is an infrastructure "
                "problem, not the agent's score: fix it or run with --sandbox none"
            )
    traj.append(
        "harness",
        "agent_exited",
        {
            "exit_code": exit_code,
            "budget_exceeded": timed_out,
            "elapsed_s": round(time.monotonic() - started, 3),
            "disk_quota_exceeded": quota_exceeded is not None,
            "log_truncated": pump.truncated,
            "oom_killed": oom_kills > 0,
        },
    )
    traj.append(
        "harness",
        "agent_resources",
        {
            "cgroup": f"v{cgroup.version}" if cgroup is not None else "none",
            "cpu_s": usage.cpu_s if usage is not None else None,
            "peak_memory_bytes": usage.peak_memory_bytes if usage is not None else None,
            "oom_kills": usage.oom_kills if usage is not None else None,
            "limits": limits.as_dict(),
            "frozen_s": round(frozen_s, 3),
            "warning": cgroup_warning,
        },
    )
    stopped = None
    if quota_exceeded is not None:
        stopped = (
            f"The agent was stopped: it had written {format_bytes(quota_exceeded)} into its "
            f"scratch and submission directories, over its {format_bytes(opts.disk_quota_bytes)} "
            "disk quota."
        )
    if oom_kills:
        oom = (
            f"The kernel's OOM killer killed {oom_kills} of the agent's processes at its "
            f"{format_bytes(limits.memory_bytes or 0)} memory limit."
        )
        stopped = oom if stopped is None else f"{stopped} {oom}"
    if task.mode is TaskMode.INTERACTIVE:
        _close_sessions(harness, run_id, traj)
    submit_agent_copy(harness, task, run_id, traj)  # task_config tasks: evaluate it now
    phase.name = "evaluating"
    stop.check()
    job = _latest(harness)
    result: EvalResult | None = None
    if job is not None:
        while not job.terminal:
            if on_progress is not None:
                on_progress("evaluating", job, time.monotonic() - started, budget)
            stop.sleep(0.25)
            job = harness.status(job.job_id)
        if on_progress is not None:
            on_progress("done", job, time.monotonic() - started, budget)
        r = harness._call(harness.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job.job_id))
        result = EvalResult.model_validate_json(r.eval_result_json)
        for event in result.events:
            traj.append_signed(SignedEvaluatorEvent.model_validate(event))
        if result.failure_source == "infrastructure":
            raise HarnessError(
                f"the evaluator failed for infrastructure reasons ({result.state}): "
                f"{result.failure_reason}; this is not the agent's score, re-run it"
            )
    phase.name = "scoring"
    stop.check()
    target = reg.target(task_id)
    if result is not None and result.state == "SUCCEEDED":
        with tempfile.TemporaryDirectory(prefix="ale-evidence-") as tmp:
            report = score(task, result.metrics, target, gate_evidence(result, Path(tmp)))
        if task.mode is TaskMode.INTERACTIVE:  # unfinished episodes: played out with null actions
            report = report.with_abandoned(
                sum(e.abandoned for e in result.episodes), len(result.episodes)
            )
        if result.training is not None:
            report = report.model_copy(
                update={"explanation": f"{report.explanation} {result.training.summary()}."}
            )
    else:
        why = _no_metric_reason(result, exit_code, timed_out, task.mode)
        if result is None and not timed_out and exit_code:
            why += f"; its output is in {log_path}"
        report = score(task, {}, target, no_result=why)
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
    run_report = RunReport(
        run_id=run_id,
        task_id=task_id,
        agent_cmd=opts.agent_cmd,
        agent_exit_code=exit_code,
        agent_budget_exceeded=timed_out,
        agent_disk_quota_exceeded=quota_exceeded is not None,
        agent_log_truncated=pump.truncated,
        budget_s=budget,
        sandbox=opts.sandbox,
        agent_cgroup=f"v{cgroup.version}" if cgroup is not None else "none",
        agent_cgroup_warning=cgroup_warning,
        agent_limits=limits.as_dict(),
        agent_cpu_s=usage.cpu_s if usage is not None else None,
        agent_peak_memory_bytes=usage.peak_memory_bytes if usage is not None else None,
        agent_oom_killed=oom_kills > 0,
        agent_frozen_s=round(frozen_s, 3),
        wall_s=time.monotonic() - started,
        job_state=result.state if result else "NO_SUBMISSION",
        eval_result=result.model_copy(update={"events": []}) if result else None,
        score=report,
        smoke_run=smoke,
    )
    last = traj.append(
        "harness",
        "score",
        {"status": report.status, "score": report.score, "line": line},
    )
    write_report(run_dir, run_report.model_copy(update={"trajectory_head": last.hash}), traj.path)
    crashed = bool(exit_code) and not timed_out and quota_exceeded is None
    return RunOutcome(
        run_id=run_id,
        run_dir=run_dir,
        report=run_report,
        score_line=line,
        agent_log_tail=_log_tail(log_path) if crashed else [],
    )


def _sandbox_mode(requested: str) -> Literal["bwrap", "none"]:
    """'bwrap' or 'none' for this run; an explicit 'bwrap' that cannot start raises."""
    if requested == "none":
        return "none"
    if requested == "bwrap":
        require_sandbox()
        return "bwrap"
    return "bwrap" if sandbox_available() else "none"


def _agent_limits(opts: RunOptions, entry: ManifestEntry | None) -> Limits:
    """The agent's caps: the command line's, else the task budget's (release manifest)."""
    budget = entry.compute_budget if entry is not None else None
    return Limits(
        cpus=opts.cpus if opts.cpus is not None else (budget.cpus if budget else None),
        memory_bytes=(
            opts.memory_bytes
            if opts.memory_bytes is not None
            else (budget.memory_bytes if budget else None)
        ),
        pids_max=opts.pids_max,
    )


def _run_cgroup(run_id: str, limits: Limits) -> tuple[RunCgroup | None, str | None]:
    """The run's cgroup (None where cgroups cannot be used) and what to warn about."""
    try:
        cgroup = create_run_cgroup(run_id, limits)
    except CgroupsUnavailable as exc:
        return None, _warn_cgroup(f"cgroups cannot be used here: {exc}", uncapped=True)
    if cgroup.missing:
        return cgroup, _warn_cgroup("; ".join(cgroup.missing), uncapped=False)
    return cgroup, None


def _warn_cgroup(reason: str, *, uncapped: bool) -> str:
    """Say on stderr what of the agent's CPU and memory is not capped or measured."""
    text = (
        f"the agent's CPU, memory and processes are neither capped nor measured: {reason} "
        "(run as root with cgroup v1 or v2 controllers mounted)"
        if uncapped
        else f"the agent's cgroup is incomplete: {reason}"
    )
    print(f"warning: {text}", file=sys.stderr, flush=True)
    return text


def _freeze(cgroup: RunCgroup | None, proc: subprocess.Popen[bytes]) -> str:
    """Stop the agent (its cgroup, else its process group); returns how."""
    if cgroup is not None:
        return cgroup.freeze()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGSTOP)
    return "SIGSTOP (process group)"


def _thaw(cgroup: RunCgroup | None, proc: subprocess.Popen[bytes]) -> None:
    if cgroup is not None:
        cgroup.thaw()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGCONT)


def _hidden_paths(opts: RunOptions, run_dir: Path, workspace: Path) -> list[Path]:
    """Inside the workspace, what the agent must not see.

    Every run directory this harness ever made (wherever it is: an earlier run's
    submission could be resubmitted, a finished run forged for ``audit``), the
    runs root, the evaluator state dir and this user's ALE state home (which
    holds the list of run directories).
    """
    candidates = [
        run_dir,
        run_dir.parent if opts.run_dir is None else run_dir,
        (opts.runs_root or Path("runs")).resolve(),
        (opts.state_dir or default_state_dir()).resolve(),
        state_home().resolve(),
        *known_run_dirs(),
    ]
    out: list[Path] = []
    for p in candidates:
        p = p.resolve()
        if p != workspace and p.is_relative_to(workspace) and p not in out:
            out.append(p)
    # An outer hidden directory covers the inner ones; mounting both would let
    # bwrap recreate the inner mount point inside the outer tmpfs, which is harmless
    # but noisy, so keep only the outermost.
    return [p for p in out if not any(q != p and q in p.parents for q in out)]


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


def _last_bwrap_line(log_path: Path) -> str:
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    found = [ln for ln in lines if ln.startswith("bwrap:")]
    return found[-1] if found else "no reason given"


def _latest(harness: AleClient) -> JobStatus | None:
    try:
        return harness.status()
    except NotFoundError:
        return None
    except FailedPreconditionError:
        return None


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
