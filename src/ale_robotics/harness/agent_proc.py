"""The agent process of one run: launched, confined, supervised, and ended.

:func:`run_agent` is the harness's agent phase in one call: ask the run's sandbox
(:mod:`ale_robotics.sandboxes`) to prepare the agent's confinement, start the command
it wraps with only the agent channel's endpoint and token, enforce the wall-clock
budget and the disk quota while it runs, freeze it while a job with host-timed
metrics is evaluated, and make sure nothing it started outlives it. What happened is
returned as an :class:`AgentRun`, the only thing the rest of the run (result,
scoring, report) needs from this phase. How the agent is confined (namespaces, a
container, nothing) is the sandbox's business alone: nothing here asks which one it is.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ale_robotics.client.sdk import AleClient, JobStatus
from ale_robotics.engines.usage import AGENT_PYTHON_VAR, agent_engine
from ale_robotics.errors import FailedPreconditionError, NotFoundError
from ale_robotics.evaluator.results.metrics import HOST_TIMED
from ale_robotics.harness.agent_access import AgentAccess
from ale_robotics.harness.agent_activity import ActivityWatch, AgentActivity
from ale_robotics.harness.agent_io import LogPump, disk_usage, format_bytes, limited_argv
from ale_robotics.harness.agent_options import agent_env_pairs
from ale_robotics.harness.hidden_modules import hidden_module_names
from ale_robotics.harness.interrupt import StopRequest
from ale_robotics.harness.options import RunOptions, default_state_dir
from ale_robotics.sandboxes import AgentLaunch, Confinement, Sandbox
from ale_robotics.sandboxes.base import AGENT_HOME
from ale_robotics.sandboxes.cgroups import Limits, Usage
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import TrajectoryWriter

__all__ = [
    "AgentAccess",
    "AgentRun",
    "AgentRunContext",
    "Progress",
    "agent_limits",
    "latest_job",
    "run_agent",
]


class Progress(Protocol):
    """What the CLI draws: the phase, the job's status, the elapsed time and the budget,
    and in the agent phase what the agent is doing (:class:`.agent_activity.AgentActivity`)."""

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
    """The longest stretch without a model or evaluator call (:mod:`.agent_activity`)."""
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


def agent_limits(opts: RunOptions, entry: ManifestEntry | None) -> Limits:
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


def latest_job(harness: AleClient) -> JobStatus | None:
    """The run's newest job, or None before its first submission."""
    try:
        return harness.status()
    except (NotFoundError, FailedPreconditionError):
        return None


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the agent's process group, SIGKILL it after 5 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_agent(
    ctx: AgentRunContext,
    harness: AleClient,
    agent_endpoint: str,
    agent_token: str,
    *,
    on_started: Callable[[], None] | None = None,
    task_dir: Path | None = None,
    access: AgentAccess | None = None,
) -> AgentRun:
    """Run the agent to its exit (or its budget, quota, or an interrupt); see the module doc.

    Its sandbox is registered as running (:mod:`ale_robotics.sandboxes.live`) from before
    it starts until it has ended, so that no directory of another run is made where it
    could see it.

    Raises :class:`HarnessError` when it cannot be started or its sandbox did not
    start; an interrupt (``ctx.stop``, Ctrl-C) propagates after the agent is killed.
    ``task_dir``: the run's task packet (``ALE_TASK_DIR``); ``access``: a service the
    agent reaches through its sandbox (the run's model gateway: its variables, socket
    directory and relay; an Inspect sample's toolbox channel).
    """
    opts = ctx.opts
    scratch = ctx.run_dir / "scratch"
    scratch.mkdir()
    home = scratch / AGENT_HOME  # its software's settings and caches: in its disk quota
    home.mkdir(mode=0o700)
    engine = agent_engine(ctx.task)  # Isaac Lab's, to train with: read-only
    launch = AgentLaunch(
        run_id=ctx.run_id,
        task_id=ctx.task.id,
        agent_cmd=opts.agent_cmd,
        endpoint=agent_endpoint,
        token=agent_token,
        workspace=ctx.workspace,
        scratch=scratch,
        submission=ctx.submission,
        limits=agent_limits(opts, ctx.manifest_entry),
        disk_quota_bytes=opts.disk_quota_bytes,
        hidden_modules=tuple(hidden_module_names(ctx.task)),  # e.g. metaworld.policies
        private_dirs=private_dirs(opts, ctx.run_dir),
        task_dir=task_dir,
        extra_env={
            **agent_env_pairs(opts),
            **run_env(opts),
            **(access.env if access is not None else {}),
            **({AGENT_PYTHON_VAR: str(engine.python)} if engine is not None else {}),
        },
        extra_rw=(access.socket_dir,) if access is not None else (),
        wrap=access.wrap if access is not None else None,
        tools=opts.agent_tools,
        shown=engine.paths if engine is not None else (),
        home=home,
    )
    log_path = ctx.run_dir / "agent.log"
    with ctx.sandbox.prepare(launch) as box:
        ctx.traj.append(
            "harness",
            "agent_launched",
            {
                "cmd": opts.agent_cmd,
                "log": log_path.name,
                "sandbox": ctx.sandbox.name,
                **box.describe(),
                "disk_quota_bytes": opts.disk_quota_bytes,
                "cgroup": box.cgroup,
                "limits": launch.limits.as_dict(),
            },
        )
        proc, sup, truncated = _supervised(ctx, harness, box, scratch, log_path, on_started, access)
        usage = box.close()
        run = AgentRun(
            exit_code=box.exit_code(proc.returncode),
            timed_out=sup.timed_out,
            quota_exceeded=sup.quota_exceeded,
            log_path=log_path,
            log_truncated=truncated,
            limits=launch.limits,
            cgroup=box.cgroup,
            cgroup_warning=box.cgroup_warning,
            usage=usage,
            frozen_s=sup.frozen_s,
            disk_quota_bytes=opts.disk_quota_bytes,
            idle_longest_s=round(sup.activity.longest_idle_s, 1) if sup.activity else 0.0,
            idle_reported=sup.activity.reported if sup.activity else False,
        )
        box.check_started(
            killed=run.timed_out or run.quota_exceeded is not None,
            log_path=log_path,
            oom=(
                f"killed at its {format_bytes(run.limits.memory_bytes or 0)} memory limit"
                if run.oom_kills
                else None
            ),
        )
        _record_exit(ctx, run)
        return run


def run_env(opts: RunOptions) -> dict[str, str]:
    """The run's own variables for the agent: ``ALE_REPETITION`` and ``ALE_SEED`` (a
    training seed) when the run was given them (an eval set gives both)."""
    env: dict[str, str] = {}
    if opts.repetition is not None:
        env["ALE_REPETITION"] = str(opts.repetition)
    if opts.agent_seed is not None:
        env["ALE_SEED"] = str(opts.agent_seed)
    return env


def private_dirs(opts: RunOptions, run_dir: Path) -> tuple[Path, ...]:
    """The directories of this run no agent may see (its sandbox adds every recorded one):
    the run directory, its runs root (hidden whole, so that what is made in it later is
    hidden too), ``./runs`` or the runs root asked for, and the evaluator's state dir."""
    return (
        run_dir,
        run_dir.parent if opts.run_dir is None else run_dir,
        (opts.runs_root or Path("runs")).resolve(),
        (opts.state_dir or default_state_dir()).resolve(),
    )


def _supervised(
    ctx: AgentRunContext,
    harness: AleClient,
    box: Confinement,
    scratch: Path,
    log_path: Path,
    on_started: Callable[[], None] | None,
    access: AgentAccess | None = None,
) -> tuple[subprocess.Popen[bytes], _Supervisor, bool]:
    """Start the wrapped command, watch it to its end, kill what it left; the process,
    its supervisor and whether its log was cut."""
    opts = ctx.opts
    sup = _Supervisor(ctx, harness, box, scratch, access)
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                limited_argv(box.argv, opts.disk_quota_bytes, box.procs_files),
                cwd=scratch,
                env=box.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=box.pass_fds,
            )
        except OSError as exc:
            raise HarnessError(f"cannot start the agent command {box.argv[0]!r}: {exc}") from None
        box.attach(proc)
        assert proc.stdout is not None
        pump = LogPump(proc.stdout, log, opts.log_cap_bytes)
        sup.proc = proc
        sup.activity = ActivityWatch(
            harness=harness,
            run_id=ctx.run_id,
            traj=ctx.traj,
            idle_after_s=opts.agent_idle_s,
            access=access,
            output=pump.last,
        )
        if on_started is not None:
            on_started()
        try:
            sup.watch()
        except BaseException:
            # Interrupted (or a bug): the agent must not outlive the harness. Thawed
            # first: a frozen process cannot act on SIGTERM.
            sup.thaw(None)
            kill_group(proc)
            box.kill_all()
            pump.join()
            proc.stdout.close()
            raise
        sup.thaw(None)
        # Whatever the agent left running in its process group (a background trainer)
        # ends with it; in a sandbox its PID namespace or container ends too, and what
        # is left in its cgroup (a process that left the group: setsid) is killed there.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        box.kill_all()
        pump.join()
        proc.stdout.close()
    return proc, sup, pump.truncated


class _Supervisor:
    """The watch loop over a running agent: budget, disk quota, freezing, progress.

    While a job of a task with host-timed metrics (planning_time) is queued or
    running, the agent is frozen: even capped, a spinning agent competes with the
    planner for cores, caches and memory bandwidth, so only a stopped agent leaves
    the measured wall-clock times as a quiet host gives them (a cap would also have
    to be chosen per host). Frozen time does not count against its budget. The
    harness polls the run's newest job every 50 ms for these tasks and freezes from
    QUEUED on (a run's jobs run in order, so a newest job not yet terminal covers
    the older ones): a job can start at most one poll before the agent stops, while
    its planner workers are still starting (about a second here, before the first
    timed problem).
    """

    def __init__(
        self,
        ctx: AgentRunContext,
        harness: AleClient,
        box: Confinement,
        scratch: Path,
        access: AgentAccess | None = None,
    ) -> None:
        self.ctx = ctx
        self.harness = harness
        self.box = box
        self.dirs = [scratch, ctx.submission]
        self.access = access
        """A service that keeps bytes on the host for the agent (the model transcript):
        they count against its quota, and a request it refused at the quota is a breach."""
        self.dir_bytes = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.host_timed = any(m.name in HOST_TIMED for m in ctx.task.metrics)
        self.frozen_since: float | None = None
        self.frozen_s = 0.0
        self.frozen_job = ""
        self.timed_out = False
        self.quota_exceeded: int | None = None
        self.activity: ActivityWatch | None = None
        """What the agent is doing (its output, its calls): set once its output is read."""

    def watch(self) -> None:
        """Poll until the agent exits, or kill it at its budget or quota.

        Each pass sleeps until the next one (0.2 s; 50 ms for host-timed tasks) or
        until the agent exits, whichever comes first (:func:`_exit_event`): the run
        goes on the moment the agent is done, not at the next pass.
        """
        proc, ctx = self.proc, self.ctx
        assert proc is not None
        exited = _exit_event(proc)
        quota = ctx.opts.disk_quota_bytes
        next_disk_check = 0.0
        while proc.poll() is None:
            now = time.monotonic()
            elapsed = now - ctx.started
            frozen_now = 0.0 if self.frozen_since is None else now - self.frozen_since
            agent_elapsed = elapsed - self.frozen_s - frozen_now
            if agent_elapsed > ctx.budget_s:
                self.timed_out = True
                self.thaw(None)
                kill_group(proc)
                return
            if elapsed >= next_disk_check:
                next_disk_check = elapsed + 1.0
                self.dir_bytes = disk_usage(self.dirs)
            # The directories are walked once a second; the service's bytes are a counter.
            breach = self.breach(quota)
            if breach is not None:
                self.quota_exceeded = breach
                self.thaw(None)
                kill_group(proc)
                return
            want_job = self.host_timed or ctx.on_progress is not None
            job = latest_job(self.harness) if want_job else None
            if self.host_timed:
                if job is not None and not job.terminal and self.frozen_since is None:
                    self.freeze(job)
                elif (job is None or job.terminal) and self.frozen_since is not None:
                    self.thaw(job)
            self.box.sample()
            frozen = self.frozen_since is not None
            activity = self.activity.update(frozen=frozen) if self.activity else None
            if ctx.on_progress is not None:
                ctx.on_progress("agent", job, agent_elapsed, ctx.budget_s, activity)
            ctx.stop.sleep(0.05 if self.host_timed else 0.2, wake=exited)
        self.dir_bytes = disk_usage(self.dirs)
        self.quota_exceeded = self.breach(quota)

    def breach(self, quota: int) -> int | None:
        """The bytes written when over the quota (None: within it)."""
        stored = self.access.stored_bytes() if self.access is not None else 0
        refused = self.access.quota_breach() if self.access is not None else None
        if refused is not None:
            return self.dir_bytes + max(refused, stored)
        used = self.dir_bytes + stored
        return used if used > quota else None

    def freeze(self, job: JobStatus) -> None:
        assert self.proc is not None
        how = self.box.freeze()
        self.frozen_since, self.frozen_job = time.monotonic(), job.job_id
        cpu = self.box.cpu_s()
        self.ctx.traj.append(
            "harness",
            "agent_frozen",
            {"job_id": job.job_id, "job_state": job.state, "how": how, "cpu_s": cpu},
        )

    def thaw(self, job: JobStatus | None) -> None:
        if self.frozen_since is None or self.proc is None:
            return
        cpu = self.box.cpu_s()  # what it got frozen
        self.box.thaw()
        spell = time.monotonic() - self.frozen_since
        self.frozen_s += spell
        self.frozen_since = None
        self.ctx.traj.append(
            "harness",
            "agent_thawed",
            {
                "job_id": self.frozen_job,
                "job_state": job.state if job is not None else None,
                "frozen_s": round(spell, 3),
                "cpu_s": cpu,
            },
        )


def _exit_event(proc: subprocess.Popen[bytes]) -> threading.Event:
    """An event set when ``proc`` exits (never set where the platform cannot tell).

    A daemon thread waits on a pidfd of the process (Linux 5.3+): it becomes readable
    when the process exits and, unlike ``waitpid``, reaps nothing, so
    :meth:`subprocess.Popen.poll` still collects the exit status. Without pidfds the
    event stays unset and the watch loop sees the exit at its next pass, as before.
    """
    exited = threading.Event()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
        return exited

    def wait() -> None:
        try:
            poller = select.poll()  # not select(): no limit on the fd's number
            poller.register(fd, select.POLLIN)
            poller.poll()
        finally:
            os.close(fd)
            exited.set()

    threading.Thread(target=wait, name="ale-agent-exit", daemon=True).start()
    return exited


def _record_exit(ctx: AgentRunContext, run: AgentRun) -> None:
    usage = run.usage
    ctx.traj.append(
        "harness",
        "agent_exited",
        {
            "exit_code": run.exit_code,
            "budget_exceeded": run.timed_out,
            "elapsed_s": round(ctx.elapsed(), 3),
            "disk_quota_exceeded": run.quota_exceeded is not None,
            "log_truncated": run.log_truncated,
            "oom_killed": run.oom_kills > 0,
        },
    )
    ctx.traj.append(
        "harness",
        "agent_resources",
        {
            "cgroup": run.cgroup,
            "cpu_s": usage.cpu_s if usage is not None else None,
            "peak_memory_bytes": usage.peak_memory_bytes if usage is not None else None,
            "oom_kills": usage.oom_kills if usage is not None else None,
            "limits": run.limits.as_dict(),
            "frozen_s": round(run.frozen_s, 3),
            "warning": run.cgroup_warning,
        },
    )
