"""``ale-robotics run``: one agent on one task, with progress, ending in a score line."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ale_robotics.cli.app import ExecutorOpt, RayAddressOpt, absolute, app, console, friendly

if TYPE_CHECKING:
    from ale_robotics.evaluator.execution import LocalExecutor
    from ale_robotics.harness.options import RunOptions

__all__: list[str] = []


_EXAMPLE = """Examples:

  ale-robotics run td3-inverted-pendulum-v1
  --agent "python examples/agents/submit_checkpoint.py"

  ale-robotics run td3-inverted-pendulum-v1 --agent "python train.py"
  --episodes 2 --budget 600

  ale-robotics run td3-inverted-pendulum-v1 --agent "python train.py"
  --label td3-lr3e-4

  ale-robotics run td3-halfcheetah-vec-v1 --agent "python train.py"
  --executor ray --ray-address HEAD_IP:6379

  ale-robotics run td3-inverted-pendulum-v1 --sandbox docker
  --agent-image ale-robotics/agent --evaluator-image ale-robotics/evaluator
  --agent "python examples/agents/submit_checkpoint.py"

The run directory (runs/<run_id>/ with agent.log, trajectory.jsonl and result.json) is \
printed when the run starts. Exit codes: 0 scored (even 0.0), 1 the run failed \
(infrastructure) or, with --strict, the agent ended in error without submitting, 2 a \
usage error (nothing was started), 130 or 143 interrupted by Ctrl-C or SIGTERM \
(result.json says interrupted).
"""


@app.command(epilog=_EXAMPLE)
@friendly
def run(
    task_id: Annotated[str, typer.Argument(help="Task id, e.g. td3-inverted-pendulum-v1.")],
    agent: Annotated[str, typer.Option("--agent", help="Command that starts the agent.")],
    run_dir: Annotated[
        Path | None,
        typer.Option(help="Run directory, new or empty (default runs/<run_id>)."),
    ] = None,
    evaluator: Annotated[
        str | None,
        typer.Option(
            help="Agent-channel address of a running evaluator, e.g. "
            "unix://STATE_DIR/agent/agent.sock ('evaluator serve' prints it; default: an "
            "embedded one). Its harness socket and harness.token are found next to it."
        ),
    ] = None,
    evaluator_harness: Annotated[
        str | None,
        typer.Option(help="Harness-channel address of that evaluator (default: found next to it)."),
    ] = None,
    agent_token_file: Annotated[Path | None, typer.Option(help="Its agent.token.")] = None,
    harness_token_file: Annotated[
        Path | None, typer.Option(help="Its harness.token (default: found next to it).")
    ] = None,
    submission_dir: Annotated[
        Path | None, typer.Option(help="Submission volume shared with that evaluator.")
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="State dir of the embedded evaluator.")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(help="Override the agent's wall-clock budget (seconds, > 0)."),
    ] = None,
    sandbox: Annotated[
        str,
        typer.Option(
            help="Agent isolation: 'bwrap' (bubblewrap: no network, sees only its workspace "
            "and the submission dir), 'docker' (a container of --agent-image: no network, "
            "non-root, read-only, only the submission and scratch dirs and the agent socket "
            "mounted), 'none' (not isolated), or 'auto' (bwrap if it can start).",
            metavar="auto|bwrap|docker|none",
        ),
    ] = "auto",
    agent_image: Annotated[
        str | None,
        typer.Option(
            metavar="IMAGE",
            help="With --sandbox docker: the agent's image, holding its code (default "
            "ale-robotics/agent:latest from 'make images'; relative paths in --agent start at "
            "its working directory).",
        ),
    ] = None,
    evaluator_image: Annotated[
        str | None,
        typer.Option(
            metavar="IMAGE",
            help="Run the evaluator in a container of this image for the run (e.g. "
            "ale-robotics/evaluator from 'make images'), sharing only the submission volume "
            "and the agent socket with the agent; the result is read through 'docker exec'.",
        ),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            help="The agent's code and data, visible read-only (default: current directory). "
            "The agent works in runs/<run_id>/scratch."
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Rollout worker processes.")] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    episodes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Smoke run: evaluate only the task's first N episodes (embedded evaluator). "
            "The result and the score say so; it is not an official result.",
        ),
    ] = None,
    disk_quota_mib: Annotated[
        int,
        typer.Option(
            min=1,
            help="Most the agent may write into its scratch and submission directories "
            "(MiB); over it the agent is stopped.",
        ),
    ] = 4096,
    log_cap_mib: Annotated[
        int, typer.Option(min=1, help="Most of the agent's output kept in agent.log (MiB).")
    ] = 64,
    cpus: Annotated[
        float | None,
        typer.Option(
            min=0.01,
            help="CPUs the agent may use (its cgroup's quota; default: the task's budget, "
            "else all).",
        ),
    ] = None,
    memory_mib: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Memory the agent may use (MiB; past it the OOM killer stops it; default: "
            "the task's budget, else all).",
        ),
    ] = None,
    pids_max: Annotated[
        int, typer.Option(min=1, help="Most processes and threads the agent may have at once.")
    ] = 4096,
    label: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help="Name of the agent for 'runs list' and the leaderboard, which rank the best "
            "official run per task and label (letters, digits, . _ + -; default: the agent "
            "script's stem, e.g. td3_train for 'python td3_train.py').",
        ),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Exit 1 when the agent ended in error (a non-zero exit, or stopped at a "
            "limit) without submitting; it is scored all the same (for scripts and CI).",
        ),
    ] = False,
) -> None:
    """Run an agent on a task and print its score (the last line starts with 'score:')."""
    # Only what comes before the evaluator's workers start is imported here; the
    # harness's run (and with it the whole evaluator) is imported after they started,
    # while they warm up (see ale_robotics.harness.prestart).
    from ale_robotics.harness.host_guard import harden_harness_process
    from ale_robotics.harness.options import RunOptions, check_label
    from ale_robotics.harness.prestart import prestarted_executor
    from ale_robotics.tasks.registry import default_registry

    logging.basicConfig(level=logging.WARNING)
    registry = default_registry()
    task = registry.get(task_id)  # an unknown id fails here, before any progress
    newer = registry.superseded_by(task_id)
    if newer is not None:
        console.print(
            f"[yellow]note:[/yellow] {task_id} is superseded by {newer} (kept to re-run its "
            f"recorded runs; scores compare within a version): for a new run, use {newer}",
            highlight=False,
            soft_wrap=True,
        )
    if label is not None:
        check_label(label)  # a label that cannot be one: exit 2 before anything starts
    if sandbox not in ("auto", "bwrap", "docker", "none"):
        raise typer.BadParameter("use 'auto', 'bwrap', 'docker' or 'none'", param_hint="--sandbox")
    if executor not in ("local", "ray"):
        raise typer.BadParameter("use 'local' or 'ray'", param_hint="--executor")
    if ray_address is not None and executor != "ray":
        raise typer.BadParameter("goes with --executor ray", param_hint="--ray-address")
    if evaluator is not None and (executor != "local" or ray_address is not None):
        raise typer.BadParameter(
            "a running evaluator (--evaluator) has its own executor: start it with "
            "'ale-robotics evaluator serve --executor ray'",
            param_hint="--executor",
        )
    from ale_robotics.sandboxes.bwrap.command import sandbox_available

    if sandbox == "none" or (sandbox == "auto" and not sandbox_available()):
        console.print(
            "[yellow]warning:[/yellow] the agent runs WITHOUT a sandbox: it can use the "
            "network and read this user's files (the evaluator's secret included). Install "
            "bubblewrap (make sandbox-deps) for isolated runs.",
            highlight=False,
            soft_wrap=True,
        )
    # Every relative path is resolved against the caller's directory now; then the
    # harness moves to a private working directory and drops it from sys.path, so
    # nothing it imports or reads later (matplotlib, ./matplotlibrc) can come from
    # a directory the agent could write.
    cwd = Path.cwd()
    opts = RunOptions(
        task_id=task_id,
        agent_cmd=agent,
        run_dir=absolute(run_dir),
        runs_root=cwd / "runs",
        evaluator=evaluator,
        evaluator_harness=evaluator_harness,
        agent_token_file=absolute(agent_token_file),
        harness_token_file=absolute(harness_token_file),
        submission_volume=absolute(submission_dir),
        state_dir=absolute(state_dir),
        budget_s=budget,
        workers=workers,
        sandbox=sandbox,  # type: ignore[arg-type]  # checked above
        workspace=absolute(workspace) or cwd,
        episodes=episodes,
        disk_quota_bytes=disk_quota_mib * 1024**2,
        log_cap_bytes=log_cap_mib * 1024**2,
        cpus=cpus,
        memory_bytes=None if memory_mib is None else memory_mib * 1024**2,
        pids_max=pids_max,
        executor=executor,
        ray_address=ray_address,
        label=label,
        agent_image=agent_image,
        evaluator_image=evaluator_image,
    )
    harden_harness_process()
    # After the hardening: a worker starts in the harness's private working directory.
    pool = prestarted_executor(opts, task)
    try:
        _run_and_report(opts, pool, strict=strict)
    finally:
        if pool is not None:  # the evaluator stopped it already, unless it never started
            pool.shutdown()


def _run_and_report(opts: RunOptions, pool: LocalExecutor | None, *, strict: bool) -> None:
    """The run itself, with its progress display, ending in the score line (or an exit)."""
    from ale_robotics.cli.progress import run_progress
    from ale_robotics.harness.interrupt import StopRequest, stop_on_signals
    from ale_robotics.harness.run import HarnessError, RunInterruptedError, run_task

    def started(run_id: str, run_dir: Path) -> None:
        console.print(
            f"run {run_id}: run dir {run_dir} (follow the agent: tail -f {run_dir / 'agent.log'})",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )

    with stop_on_signals(StopRequest()) as stop, run_progress(console) as show:
        try:
            outcome = run_task(opts, on_progress=show, on_start=started, stop=stop, executor=pool)
        except RunInterruptedError as exc:
            console.print("[yellow]interrupted:[/yellow] ", end="", highlight=False)
            console.print(exc.message, highlight=False, soft_wrap=True, markup=False)
            console.print(
                f"run dir: {exc.run_dir} (result.json says interrupted)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(128 + signal.Signals[exc.signal_name].value) from None
        except HarnessError as exc:
            console.print("[red]run failed:[/red] ", end="", highlight=False)
            console.print(exc.message, highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(1) from None
    rep = outcome.report
    # The explanation quotes agent-controlled text (a rejected file's tensor key, say):
    # never parse it as rich markup.
    console.print(f"run dir: {outcome.run_dir}", highlight=False, markup=False)
    console.print(rep.score.explanation, highlight=False, markup=False)
    typer.echo(outcome.score_line)  # one line, never wrapped: stdout's last line
    if outcome.agent_log_tail:  # under the score line, where the eye lands
        console.print(
            f"the agent exited with code {rep.agent_exit_code}; the last lines of "
            f"{outcome.run_dir / 'agent.log'}:",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        for line in outcome.agent_log_tail:
            console.print(f"  | {line}", highlight=False, markup=False, soft_wrap=True)
    failure = rep.agent_failure
    if strict and failure is not None:
        console.print(
            f"[red]--strict:[/red] the agent {failure} without submitting: exit 1",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
