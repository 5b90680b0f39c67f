"""The watch over a running agent: its wall-clock budget, its disk quota (the model
transcript's bytes included), freezing it while a host-timed job runs, and its end
(:func:`supervise`); :func:`.proc.run_agent` launches it and records what came of it."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ale_robotics.client.sdk import AleClient, JobStatus
from ale_robotics.errors import FailedPreconditionError, NotFoundError
from ale_robotics.evaluator.results.metrics import HOST_TIMED
from ale_robotics.harness.agent.access import AgentAccess
from ale_robotics.harness.agent.activity import ActivityWatch
from ale_robotics.harness.agent.context import AgentRunContext
from ale_robotics.harness.agent.io import LogPump, disk_usage, limited_argv
from ale_robotics.sandboxes import Confinement
from ale_robotics.sandboxes.errors import HarnessError


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


def supervise(
    ctx: AgentRunContext,
    harness: AleClient,
    box: Confinement,
    scratch: Path,
    log_path: Path,
    on_started: Callable[[], None] | None,
    access: AgentAccess | None = None,
) -> tuple[subprocess.Popen[bytes], Supervisor, bool]:
    """Start the wrapped command, watch it to its end, kill what it left; the process,
    its supervisor and whether its log was cut."""
    opts = ctx.opts
    sup = Supervisor(ctx, harness, box, scratch, access)
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


class Supervisor:
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
