"""``ale-robotics run``: one agent on one task, with progress, ending in a score line.

Its options are not written here: each is a field of the run options' one declaration
(:mod:`ale_robotics.harness.options`), and :func:`_parameters` makes the command's
parameters from them (flag, type, default, help, range, help panel), so that the
command, :class:`~ale_robotics.harness.options.RunOptions` and an eval set's SPEC
cannot drift apart.
"""

from __future__ import annotations

import inspect
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import annotated_types
import typer

from ale_robotics.cli.app import app, console, friendly
from ale_robotics.harness.options.flags import command_fields

if TYPE_CHECKING:
    from ale_robotics.evaluator.execution import LocalExecutor
    from ale_robotics.harness.interrupt import StopRequest
    from ale_robotics.harness.options import RunOptions
    from ale_robotics.sandboxes import Sandbox

__all__: list[str] = []


_EXAMPLE = """Examples:

  ale-robotics run td3-inverted-pendulum-v2 \\
    --agent "python examples/agents/submit_checkpoint.py"

  ale-robotics run td3-inverted-pendulum-v2 --agent "python train.py" \\
    --episodes 2 --budget 600

  ale-robotics run td3-inverted-pendulum-v2 --agent "python train.py" \\
    --label td3-lr3e-4

  ale-robotics run td3-halfcheetah-vec-v1 --agent "python train.py" \\
    --executor ray --ray-address HEAD_IP:6379

  ale-robotics run td3-inverted-pendulum-v2 --sandbox docker \\
    --agent-image ale-robotics/agent \\
    --evaluator-image ale-robotics/evaluator \\
    --agent "python examples/agents/submit_checkpoint.py"

The run directory (runs/<run_id>/ with agent.log, trajectory.jsonl and result.json) is \
printed when the run starts. Exit codes: 0 scored (even 0.0), 1 the run failed \
(infrastructure) or, with --strict, the agent ended in error without submitting, 2 a \
usage error (nothing was started), 130 or 143 interrupted by Ctrl-C or SIGTERM \
(result.json says interrupted).
"""


def _parameters() -> list[inspect.Parameter]:
    """One parameter per run option (:func:`~ale_robotics.harness.options.flags.command_fields`):
    the field's type in its flag's unit, its default, description as help, lower bound
    as the option's range, group as the help panel."""
    params = []
    for panel, name, field, flag in command_fields():
        default: Any = inspect.Parameter.empty if field.is_required() else field.default
        annotation: Any = field.annotation
        if flag.scale != 1:  # the field holds bytes, the flag takes MiB
            annotation = int if field.default is not None else int | None
            default = None if default is None else default // flag.scale
        if flag.repeat:  # given once per value (Typer collects them in a list)
            annotation, default = list[str] | None, None
        info: Any
        if flag.argument:
            info = typer.Argument(help=field.description)
        else:
            low: Any = next(
                (m.ge for m in field.metadata if isinstance(m, annotated_types.Ge)), None
            )
            choices = flag.choices() if flag.choices is not None else None
            info = typer.Option(
                flag.name,
                help=field.description,
                metavar=flag.metavar or ("|".join(choices) if choices else None),
                min=None if low is None else low // flag.scale if flag.scale != 1 else low,
                rich_help_panel=panel,
            )
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[annotation, info],
            )
        )
    return params


def run(**params: Any) -> None:
    """Run an agent on a task and print its score (the last line starts with 'score:')."""
    from ale_robotics.harness.interrupt import RunInterrupted, StopRequest, stop_on_signals

    # Ctrl-C and SIGTERM are routed to `stop` from here on, and acted on at safe points:
    # before the run directory exists, a stop leaves nothing behind and says so.
    with stop_on_signals(StopRequest()) as stop:
        pool: LocalExecutor | None = None
        try:
            opts, sandbox, pool = _start(params, stop)
            _run_and_report(opts, sandbox, pool, stop)
        except RunInterrupted as exc:  # raised before the run directory was made
            console.print(
                f"[yellow]interrupted[/yellow] ({exc.signal_name}) before the run started; "
                "nothing created",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(128 + signal.Signals[exc.signal_name].value) from None
        finally:
            if pool is not None:  # the evaluator stopped it already, unless it never started
                pool.shutdown()


def _start(
    params: dict[str, Any], stop: StopRequest
) -> tuple[RunOptions, Sandbox, LocalExecutor | None]:
    """The options checked (exit 2 on a usage error, before anything heavy is imported
    or started), the harness process hardened, the embedded evaluator's workers starting."""
    # Only what the checks need is imported here (no simulator, gRPC or torch): a usage
    # error costs what an unknown task costs. The harness's run (and with it the whole
    # evaluator) is imported after the evaluator's workers started, while they warm up
    # (see ale_robotics.harness.prestart).
    from ale_robotics.harness.host_guard import harden_harness_process
    from ale_robotics.harness.options.flags import from_command_line
    from ale_robotics.harness.preflight import check_run
    from ale_robotics.harness.prestart import prestarted_executor
    from ale_robotics.tasks.registry import default_registry

    logging.basicConfig(level=logging.WARNING)
    registry = default_registry()
    task_id = params["task_id"]
    task = registry.get(task_id)  # an unknown id fails here, before any progress
    newer = registry.superseded_by(task_id)
    if newer is not None:
        console.print(
            f"[yellow]note:[/yellow] {task_id} is superseded by {newer} (kept to re-run its "
            f"recorded runs; scores compare within a version): for a new run, use {newer}",
            highlight=False,
            soft_wrap=True,
        )
    # Every relative path is resolved against the caller's directory now; then the
    # harness moves to a private working directory and drops it from sys.path, so
    # nothing it imports or reads later (matplotlib, ./matplotlibrc) can come from
    # a directory the agent could write. Every option is checked here: exit 2 before
    # anything starts.
    opts = from_command_line(params, Path.cwd())
    sandbox = check_run(opts, task)
    stop.check()
    if not sandbox.isolates:
        console.print(
            "[yellow]warning:[/yellow] the agent runs WITHOUT a sandbox: it can use the "
            "network and read this user's files (the evaluator's secret included). Install "
            "bubblewrap (make sandbox-deps) for isolated runs.",
            highlight=False,
            soft_wrap=True,
        )
    harden_harness_process()
    # After the hardening: a worker starts in the harness's private working directory.
    pool = prestarted_executor(opts, task)
    try:
        stop.check()
    except BaseException:
        if pool is not None:
            pool.shutdown()
        raise
    return opts, sandbox, pool


# Typer reads the parameters from the signature and their types from the annotations.
_SIGNATURE = inspect.Signature(_parameters())
run.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
run.__annotations__ = {p.name: p.annotation for p in _SIGNATURE.parameters.values()}
app.command(epilog=_EXAMPLE)(friendly(run))


def _run_and_report(
    opts: RunOptions, sandbox: Sandbox, pool: LocalExecutor | None, stop: StopRequest
) -> None:
    """The run itself, with its progress display, ending in the score line (or an exit)."""
    from ale_robotics.cli.progress import run_progress
    from ale_robotics.harness.run import run_task
    from ale_robotics.harness.stopped_run import RunInterruptedError
    from ale_robotics.model.video import VIDEOS_DIR, read_video_index
    from ale_robotics.sandboxes.errors import HarnessError

    def started(run_id: str, run_dir: Path) -> None:
        console.print(
            f"run {run_id}: run dir {run_dir} (follow the agent: tail -f {run_dir / 'agent.log'})",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )

    with run_progress(console) as show:
        try:
            outcome = run_task(
                opts,
                on_progress=show,
                on_start=started,
                stop=stop,
                executor=pool,
                checked=sandbox,
            )
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
    videos = read_video_index(outcome.run_dir)
    if videos is not None:  # what the harness fetched after the result (--videos K)
        n, folder = len(videos.videos), outcome.run_dir / VIDEOS_DIR
        shown = f"{n} in {folder}" if n else "none"
        why = f" ({videos.error})" if videos.error else ""
        console.print(f"videos: {shown}{why}", highlight=False, markup=False, soft_wrap=True)
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
    if opts.strict and failure is not None:
        console.print(
            f"[red]--strict:[/red] the agent {failure} without submitting: exit 1",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
