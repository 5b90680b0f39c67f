"""The agent process of one run: launched, confined, supervised, and ended.

:func:`run_agent` is the harness's agent phase in one call: build the command
(inside bubblewrap when the run is sandboxed), start it in the run's cgroup with
only the agent channel's endpoint and token, enforce the wall-clock budget and the
disk quota while it runs, freeze it while a job with host-timed metrics is
evaluated, and make sure nothing it started outlives it. What happened is
returned as an :class:`AgentRun`, the only thing the rest of the run (result,
scoring, report) needs from this phase, so a second way of confining an agent
(a container) plugs in here without touching the evaluation or scoring code.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ale_robotics.client.sdk import AleClient, JobStatus
from ale_robotics.errors import FailedPreconditionError, NotFoundError
from ale_robotics.evaluator.metrics import HOST_TIMED
from ale_robotics.harness.agent_io import LogPump, disk_usage, format_bytes, limited_argv
from ale_robotics.harness.errors import HarnessError
from ale_robotics.harness.hidden_modules import hidden_module_names, sandbox_hidden_paths
from ale_robotics.harness.interrupt import StopRequest
from ale_robotics.harness.options import RunOptions, default_state_dir
from ale_robotics.harness.preflight import workspace_argv
from ale_robotics.paths import state_home
from ale_robotics.sandboxes.bwrap.command import (
    bwrap_command,
    read_sandbox_status,
    sandbox_mounts,
    shown_trees,
)
from ale_robotics.sandboxes.cgroups import (
    CgroupsUnavailable,
    Limits,
    RunCgroup,
    Usage,
    create_run_cgroup,
)
from ale_robotics.sandboxes.docker.container import AgentContainer, launch_agent_container
from ale_robotics.sandboxes.live import register as register_sandbox
from ale_robotics.sandboxes.mount_plan import Mount, plan_mounts
from ale_robotics.sandboxes.run_dirs import known_run_dirs
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import TrajectoryWriter

__all__ = [
    "AgentRun",
    "AgentRunContext",
    "Progress",
    "agent_limits",
    "latest_job",
    "run_agent",
]

Progress = Callable[[str, JobStatus | None, float, float], None]
"""(phase, job status, elapsed, budget) -> None; the CLI draws it."""


class AgentCgroup(Protocol):
    """What the agent phase does with the agent's cgroup: the run's own
    (:class:`~.cgroups.RunCgroup`), or Docker's for a container (:class:`AgentContainer`)."""

    @property
    def procs_files(self) -> list[Path]: ...
    def join(self, pid: int) -> None: ...
    def sample(self) -> None: ...
    def cpu_s(self) -> float | None: ...
    def freeze(self, timeout_s: float = ...) -> str: ...
    def thaw(self) -> None: ...
    def kill_all(self, timeout_s: float = ...) -> int: ...
    def close(self) -> Usage: ...


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
                "into its scratch and submission directories, over its "
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


def agent_env(
    endpoint: str,
    token: str,
    task_id: str,
    run_id: str,
    submission: Path,
    workspace: Path,
    scratch: Path,
) -> dict[str, str]:
    """The agent's whole environment: a few of the harness's variables, then the run's."""
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
) -> AgentRun:
    """Run the agent to its exit (or its budget, quota, or an interrupt); see the module doc.

    Its sandbox is registered as running (:mod:`.live_sandboxes`) from before it starts
    until it has ended, so that no directory of another run is made where it could see it.

    Raises :class:`HarnessError` when it cannot be started or its sandbox did not
    start; an interrupt (``ctx.stop``, Ctrl-C) propagates after the agent is killed.
    """
    with _sandbox_lease(ctx, agent_endpoint) as hide:
        return _run_agent(ctx, harness, agent_endpoint, agent_token, hide, on_started)


@contextlib.contextmanager
def _sandbox_lease(ctx: AgentRunContext, agent_endpoint: str) -> Iterator[list[Path]]:
    """Register the run's sandbox while the block runs; yields what bwrap is to hide.

    The hidden paths are read again once the sandbox is registered: a directory
    recorded meanwhile (:func:`.run_dirs.new_private_dirs`) is then hidden too, or
    its maker, reading the registry after recording it, refuses it.
    """
    opts = ctx.opts
    scratch = ctx.run_dir / "scratch"
    sock = Path(agent_endpoint.removeprefix("unix://"))
    if opts.sandbox == "bwrap" and agent_endpoint.startswith("unix://"):
        workspace = ctx.workspace
        shown = shown_trees(workspace)

        def plan(hide: list[Path]) -> list[Mount]:
            return sandbox_mounts(
                workspace=workspace,
                scratch_dir=scratch,
                submission_dir=ctx.submission,
                agent_socket=sock,
                hide=hide,
            )

        hide = hidden_paths(opts, ctx.run_dir, workspace, shown)
        with register_sandbox(ctx.run_id, "bwrap", workspace, plan(hide)) as lease:
            hide = hidden_paths(opts, ctx.run_dir, workspace, shown)
            lease.update(plan(hide))
            yield hide
    elif opts.sandbox == "docker":  # shows its scratch, submission and socket dirs only
        rw = [scratch, ctx.submission]
        if agent_endpoint.startswith("unix://"):
            rw.append(sock.parent)
        with register_sandbox(ctx.run_id, "docker", None, plan_mounts([], [], rw)):
            yield []
    else:
        yield []


def _run_agent(
    ctx: AgentRunContext,
    harness: AleClient,
    agent_endpoint: str,
    agent_token: str,
    hide: list[Path],
    on_started: Callable[[], None] | None,
) -> AgentRun:
    """:func:`run_agent` once its sandbox is registered, ``hide`` what it hides."""
    opts, task = ctx.opts, ctx.task
    workspace = ctx.workspace
    scratch = ctx.run_dir / "scratch"
    scratch.mkdir()
    env = agent_env(
        agent_endpoint, agent_token, task.id, ctx.run_id, ctx.submission, workspace, scratch
    )
    log_path = ctx.run_dir / "agent.log"
    argv = workspace_argv(shlex.split(opts.agent_cmd), workspace)
    status_r: int | None = None
    pass_fds: tuple[int, ...] = ()
    if opts.sandbox == "bwrap":
        if not agent_endpoint.startswith("unix://"):
            raise HarnessError(
                "the agent sandbox has no network: the evaluator's agent channel must be a "
                "Unix socket (unix://...), or run with --sandbox none"
            )
        status_r, status_w = os.pipe()
        pass_fds = (status_w,)
        argv = bwrap_command(
            argv,
            workspace=workspace,
            scratch_dir=scratch,
            submission_dir=ctx.submission,
            agent_socket=Path(agent_endpoint.removeprefix("unix://")),
            hide=hide,
            block_imports=sandbox_hidden_paths(task),  # e.g. metaworld.policies
            status_fd=status_w,
        )
    limits = agent_limits(opts, ctx.manifest_entry)
    container: AgentContainer | None = None
    cgroup: AgentCgroup | None
    if opts.sandbox == "docker":
        # The agent in a container of its image; Docker makes (and caps) its cgroup.
        container = launch_agent_container(
            run_id=ctx.run_id,
            task_id=task.id,
            image=opts.agent_image,
            argv=shlex.split(opts.agent_cmd),
            agent_endpoint=agent_endpoint,
            agent_token=agent_token,
            scratch=scratch,
            submission=ctx.submission,
            limits=limits,
            max_file_bytes=opts.disk_quota_bytes,
            hidden_modules=hidden_module_names(task),  # e.g. metaworld.policies
        )
        argv = container.start_argv()
        cgroup, cgroup_warning, cgroup_name = container, None, "docker"
    else:
        run_cgroup, cgroup_warning = _run_cgroup(ctx.run_id, limits)
        cgroup = run_cgroup
        cgroup_name = f"v{run_cgroup.version}" if run_cgroup is not None else "none"
    ctx.traj.append(
        "harness",
        "agent_launched",
        {
            "cmd": opts.agent_cmd,
            "log": log_path.name,
            "sandbox": opts.sandbox,
            **(
                {}
                if container is None
                else {"image": container.image.ref, "image_id": container.image.id}
            ),
            "disk_quota_bytes": opts.disk_quota_bytes,
            "cgroup": cgroup_name,
            "limits": limits.as_dict(),
        },
    )
    sup = _Supervisor(ctx, harness, cgroup, scratch)
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
            sup.proc = proc
            if on_started is not None:
                on_started()
            try:
                sup.watch()
            except BaseException:
                # Interrupted (or a bug): the agent must not outlive the harness. Thawed
                # first: a frozen process cannot act on SIGTERM.
                sup.thaw(None)
                kill_group(proc)
                if cgroup is not None:
                    cgroup.kill_all()
                pump.join()
                proc.stdout.close()
                raise
            sup.thaw(None)
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
        if cgroup is not None:  # a container is removed here too, whatever happened
            usage = cgroup.close()
    if container is not None and container.warning is not None:
        cgroup_warning = _warn_cgroup(container.warning, uncapped=False)
    run = AgentRun(
        # A container's own exit status (the docker CLI's may be its reaction to a signal).
        exit_code=proc.returncode if container is None else container.exit_code(proc.returncode),
        timed_out=sup.timed_out,
        quota_exceeded=sup.quota_exceeded,
        log_path=log_path,
        log_truncated=pump.truncated,
        limits=limits,
        cgroup=cgroup_name,
        cgroup_warning=cgroup_warning,
        usage=usage,
        frozen_s=sup.frozen_s,
        disk_quota_bytes=opts.disk_quota_bytes,
    )
    if status_r is not None:
        _check_sandbox_started(run, status_r, workspace)
    if container is not None:
        container.check_started(
            killed=run.timed_out or run.quota_exceeded is not None,
            log_tail=_last_line(log_path, "Error"),
        )
    _record_exit(ctx, run)
    return run


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
        cgroup: AgentCgroup | None,
        scratch: Path,
    ) -> None:
        self.ctx = ctx
        self.harness = harness
        self.cgroup = cgroup
        self.dirs = [scratch, ctx.submission]
        self.proc: subprocess.Popen[bytes] | None = None
        self.host_timed = any(m.name in HOST_TIMED for m in ctx.task.metrics)
        self.frozen_since: float | None = None
        self.frozen_s = 0.0
        self.frozen_job = ""
        self.timed_out = False
        self.quota_exceeded: int | None = None

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
                used = disk_usage(self.dirs)
                if used > quota:
                    self.quota_exceeded = used
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
            if self.cgroup is not None:
                self.cgroup.sample()
            if ctx.on_progress is not None:
                ctx.on_progress("agent", job, agent_elapsed, ctx.budget_s)
            ctx.stop.sleep(0.05 if self.host_timed else 0.2, wake=exited)
        used = disk_usage(self.dirs)
        if used > quota:
            self.quota_exceeded = used

    def freeze(self, job: JobStatus) -> None:
        assert self.proc is not None
        how = _freeze(self.cgroup, self.proc)
        self.frozen_since, self.frozen_job = time.monotonic(), job.job_id
        cpu = self.cgroup.cpu_s() if self.cgroup is not None else None
        self.ctx.traj.append(
            "harness",
            "agent_frozen",
            {"job_id": job.job_id, "job_state": job.state, "how": how, "cpu_s": cpu},
        )

    def thaw(self, job: JobStatus | None) -> None:
        if self.frozen_since is None or self.proc is None:
            return
        cpu = self.cgroup.cpu_s() if self.cgroup is not None else None  # what it got frozen
        _thaw(self.cgroup, self.proc)
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


def _check_sandbox_started(run: AgentRun, status_r: int, workspace: Path) -> None:
    """Raise when bubblewrap never ran the agent (and the harness did not kill it)."""
    status = read_sandbox_status(status_r)
    killed = run.timed_out or run.quota_exceeded is not None  # by the harness itself
    if killed or status.agent_ran:
        return
    why = _last_bwrap_line(run.log_path)
    if run.oom_kills:
        why = f"killed at its {format_bytes(run.limits.memory_bytes or 0)} memory limit"
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


def _freeze(cgroup: AgentCgroup | None, proc: subprocess.Popen[bytes]) -> str:
    """Stop the agent (its cgroup, else its process group); returns how."""
    if cgroup is not None:
        return cgroup.freeze()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGSTOP)
    return "SIGSTOP (process group)"


def _thaw(cgroup: AgentCgroup | None, proc: subprocess.Popen[bytes]) -> None:
    if cgroup is not None:
        cgroup.thaw()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGCONT)


def hidden_paths(
    opts: RunOptions, run_dir: Path, workspace: Path, shown: Sequence[Path] | None = None
) -> list[Path]:
    """Inside the trees the sandbox shows (``shown``, default the workspace), what the
    agent must not see.

    Every run directory, runs root, submission and state dir this harness ever made
    (wherever it is: an earlier run's submission could be resubmitted, a finished run
    forged for ``audit``; a runs root is hidden whole, so that what is made in it
    later is hidden too), this run's runs root, the evaluator state dir and this
    user's ALE state home (which holds those lists).
    """
    candidates = [
        run_dir,
        run_dir.parent if opts.run_dir is None else run_dir,
        (opts.runs_root or Path("runs")).resolve(),
        (opts.state_dir or default_state_dir()).resolve(),
        state_home().resolve(),
        *known_run_dirs(),
    ]
    # On strings (os.path): the candidates are every run dir ever recorded, and this
    # runs before the agent starts; pathlib costs several times more per path.
    roots = {os.path.realpath(t) for t in ([workspace] if shown is None else shown)}
    insides = tuple(r if r.endswith(os.sep) else r + os.sep for r in roots)
    found: dict[str, None] = {}  # ordered, without duplicates
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real.startswith(insides):  # below a shown tree, not the tree itself
            found[real] = None
    out = [Path(p) for p in found]
    # An outer hidden directory covers the inner ones; mounting both would let
    # bwrap recreate the inner mount point inside the outer tmpfs, which is harmless
    # but noisy, so keep only the outermost.
    return [p for p in out if not any(q != p and q in p.parents for q in out)]


def _last_bwrap_line(log_path: Path) -> str:
    return _last_line(log_path, "bwrap:") or "no reason given"


def _last_line(log_path: Path, prefix: str) -> str:
    """The log's last line starting with ``prefix`` (bwrap's or docker's reason), or ''."""
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    found = [ln for ln in lines if ln.startswith(prefix)]
    return found[-1] if found else ""
