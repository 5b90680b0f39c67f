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

from collections.abc import Callable
from pathlib import Path

from ale_robotics.client.sdk import AleClient
from ale_robotics.engines.usage import AGENT_PYTHON_VAR, agent_engine
from ale_robotics.harness.agent.access import AgentAccess
from ale_robotics.harness.agent.context import AgentRun, AgentRunContext
from ale_robotics.harness.agent.hidden_modules import hidden_module_names
from ale_robotics.harness.agent.io import format_bytes
from ale_robotics.harness.agent.supervisor import supervise
from ale_robotics.harness.options import RunOptions, default_state_dir
from ale_robotics.harness.options.agent import agent_env_pairs
from ale_robotics.sandboxes import AgentLaunch
from ale_robotics.sandboxes.base import AGENT_HOME
from ale_robotics.sandboxes.cgroups import Limits
from ale_robotics.tasks.manifest import ManifestEntry

__all__ = ["agent_limits", "private_dirs", "run_agent", "run_env"]


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
        proc, sup, truncated = supervise(ctx, harness, box, scratch, log_path, on_started, access)
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
