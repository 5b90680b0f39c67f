"""``ale-robotics eval-set``: run a grid of tasks x agents x repetitions, then aggregate.

The work is in :mod:`ale_robotics.evalset`; this module reads the options, shows
progress on stderr, prints the tables (or one JSON document) on stdout and picks the
exit code. Everything heavy (the harness's report model, rliable) is imported inside
the command, so registering it costs the rest of the command line nothing.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich import box
from rich.table import Table

from ale_robotics.cli.app import absolute, app, console, emit_json, friendly, out

if TYPE_CHECKING:
    from ale_robotics.evalset import (
        EvalSetAggregate,
        EvalSetSpec,
        Interval,
        RunEvent,
        RunOutcome,
        SetOutcome,
    )

__all__: list[str] = []

_EPILOG = """Example SPEC (YAML):

  schema_version: 1
  tasks:
    - td3-inverted-pendulum-v2
    - td3-halfcheetah-vec-v1
  agents:
    - {label: checkpoint, cmd: "python examples/agents/submit_checkpoint.py"}
    - {label: td3, cmd: "python examples/agents/td3_train.py"}
  repetitions: 5
  episodes: 2        # optional: smoke runs

Runs go to RUNS_ROOT/NAME/TASK/LABEL/rep<k>/ (NAME: the SPEC's name, else its file \
stem); the aggregate (aggregate.json, aggregate.md, interval_estimates.png, \
per_task_iqm.png, performance_profile.png, and score_vs_tokens.png where runs had a \
model gateway) to the SPEC's out, else RUNS_ROOT/NAME/aggregate/. Running the same \
command again skips completed runs and redoes interrupted or failed ones. Exit codes: \
0 every run completed, 1 some run failed (the others are aggregated) or, with \
--strict, some run's agent ended in error without submitting, 2 a usage error (a bad \
SPEC, an unknown task, an agent command that cannot start; nothing was started), 130 \
or 143 interrupted by Ctrl-C or SIGTERM (rerun to resume).
"""


def _check_tasks(spec: EvalSetSpec, spec_path: Path) -> None:
    """Unknown tasks and impossible smoke sizes: refused before any run starts (exit 2),
    instead of failing every run of the set one after the other."""
    from ale_robotics.errors import InvalidArgumentError, TaskNotFoundError
    from ale_robotics.tasks import default_registry

    registry = default_registry()
    episodes = spec.settings().episodes
    for task_id in spec.tasks:
        try:
            task = registry.get(task_id)
        except TaskNotFoundError as exc:  # its message names the task and what to do
            raise InvalidArgumentError(f"{spec_path}: tasks: {exc.message}") from None
        total = task.eval.evaluated_episodes
        if episodes is not None and episodes > total:
            raise InvalidArgumentError(
                f"{spec_path}: episodes: {episodes}, but {task_id} evaluates {total} "
                f"episode(s); use at most {total} (or leave episodes out for official runs)"
            )


def _check_agents(spec: EvalSetSpec, spec_path: Path) -> None:
    """Every agent command as ``run`` checks it (its program, the script it runs, in the
    set's sandbox), once for the set and before any run starts: a typo is exit 2, not N
    runs scored 0."""
    from ale_robotics.errors import InvalidArgumentError
    from ale_robotics.harness.preflight import check_agent_command
    from ale_robotics.sandboxes import resolve_sandbox

    for i, agent in enumerate(spec.agents):
        opts = spec.run_options(spec.tasks[0], agent.label, agent.cmd, Path("."))
        sandbox = resolve_sandbox(opts.sandbox, check=False, agent_image=opts.agent_image)
        assert opts.workspace is not None  # the run command's default: this directory
        try:
            check_agent_command(opts, opts.workspace.resolve(), sandbox)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(
                f"{spec_path}: agents.{i} ({agent.label}): {exc.message}"
            ) from None


def _progress(event: RunEvent) -> None:
    width = len(str(event.total))
    count = f"[{event.done:>{width}}/{event.total}]"
    if event.kind == "stopping":
        console.print(f"[yellow]{event.message}[/yellow]", highlight=False, soft_wrap=True)
        return
    assert event.slot is not None
    if event.kind == "start":
        extra = f" {event.message}" if event.message else ""
        line = f"{count} start {event.slot.key}{extra}"
        console.print(line, highlight=False, markup=False, soft_wrap=True)
        return
    o = event.outcome
    assert o is not None
    if o.state == "completed":
        score = "unscored" if o.score is None else f"score {o.score:.3f}"
        line = f"{count} done  {event.slot.key}: {score} ({o.wall_s:.1f} s)"
        if o.agent_failure is not None:
            log = o.slot.run_dir / "agent.log"
            line += f"; the agent {o.agent_failure} without submitting (log: {log})"
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    else:
        console.print(
            f"{count} {o.state} {event.slot.key}: ", end="", highlight=False, markup=False
        )
        console.print(o.message, highlight=False, markup=False, soft_wrap=True)


def _interrupted_early(when: str) -> NoReturn:
    console.print(
        f"[yellow]interrupted {when}:[/yellow] run the same command again to resume",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(130)


def _ci(iv: Interval | None) -> tuple[str, str]:
    if iv is None:
        return "-", ""
    return f"{iv.value:.3f}", f"[{iv.low:.3f}, {iv.high:.3f}]"


def _print_tables(agg: EvalSetAggregate) -> None:
    """The aggregate as tables that fit 80 columns: one per task, then one across tasks."""
    pct = f"{agg.bootstrap.confidence:.0%}"
    for task in agg.tasks:
        t = Table(title=task, box=box.SIMPLE_HEAD, title_justify="left", title_style="bold")
        t.add_column("agent", overflow="fold", min_width=8)
        t.add_column("n", justify="right", no_wrap=True)
        t.add_column("mean", justify="right", no_wrap=True)
        t.add_column(f"{pct} CI", no_wrap=True)
        t.add_column("IQM", justify="right", no_wrap=True)
        t.add_column(f"{pct} CI", no_wrap=True)
        for c in agg.cells:
            if c.task_id == task:
                t.add_row(c.label, f"{c.n}/{c.runs_expected}", *_ci(c.mean), *_ci(c.iqm))
        out.print(t)
    t = Table(
        title="across tasks (normalized: 1.0 = paper; runs per task)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        title_style="bold",
    )
    t.add_column("agent", overflow="fold", min_width=8)
    t.add_column("runs", justify="right", no_wrap=True)  # per task
    t.add_column("IQM", justify="right", no_wrap=True)
    t.add_column(f"{pct} CI", no_wrap=True)
    t.add_column("opt. gap", justify="right", no_wrap=True)
    t.add_column(f"{pct} CI", no_wrap=True)
    for a in agg.agents:
        t.add_row(a.label, str(a.runs_per_task), *_ci(a.iqm), *_ci(a.optimality_gap))
    out.print(t)
    _print_cost(agg, pct)
    for note in [*agg.notes, *(f"{a.label}: {a.note}" for a in agg.agents if a.note)]:
        out.print(f"note: {note}", highlight=False, markup=False)  # wrapped to the width


def _print_cost(agg: EvalSetAggregate, pct: str) -> None:
    """The model's cost beside the score (issue 45): each agent's mean tokens and calls per
    run and whether it is on the score-vs-tokens Pareto frontier; nothing for a set none
    of whose runs had a model gateway (aggregate.md and the report say why)."""
    from ale_robotics.evalset.render import tokens_text

    if not any(c.runs_counted for c in agg.cost):
        return
    t = Table(
        title="model cost per run (frontier: no agent scores higher on fewer tokens)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        title_style="bold",
    )
    t.add_column("agent", overflow="fold", min_width=8)
    t.add_column("mean", justify="right", no_wrap=True)
    t.add_column("tokens", justify="right", no_wrap=True)
    t.add_column(f"{pct} CI", no_wrap=True)
    t.add_column("calls", justify="right", no_wrap=True)
    t.add_column("frontier", no_wrap=True)
    for c in agg.cost:
        score = "-" if c.score is None else f"{c.score.value:.3f}"
        tokens, ci = "-", ""
        if c.tokens is not None:
            tokens = tokens_text(c.tokens.value)
            ci = f"[{tokens_text(c.tokens.low)}, {tokens_text(c.tokens.high)}]"
        calls = "-" if c.calls is None else f"{c.calls:.1f}"
        frontier = {True: "yes", False: "no", None: "-"}[c.pareto]
        t.add_row(c.label, score, tokens, ci, calls, frontier)
    out.print(t)


def _runs_json(outcome: SetOutcome) -> list[dict[str, Any]]:
    return [
        {
            "task_id": o.slot.task_id,
            "label": o.slot.label,
            "rep": o.slot.rep,
            "run_dir": str(o.slot.run_dir),
            "state": o.state,
            "run_id": o.run_id,
            "score": o.score,
            "score_status": o.score_status,
            "exit_code": o.exit_code,
            "message": o.message,
            "agent_failure": o.agent_failure,
        }
        for o in outcome.outcomes
    ]


@app.command("eval-set", epilog=_EPILOG)
@friendly
def eval_set(
    spec_path: Annotated[
        Path,
        typer.Argument(
            metavar="SPEC.yaml",
            exists=True,
            dir_okay=False,
            help="The set: tasks, agents (label, cmd), repetitions (see below).",
        ),
    ],
    runs_root: Annotated[
        Path,
        typer.Option("--runs-root", metavar="DIR", help="Where the set's run directories go."),
    ] = Path("runs"),
    jobs: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="Runs at once (default: min(cores, 2))."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Exit 1 when some run's agent ended in error (a non-zero exit, or stopped "
            "at a limit) without submitting; those runs are scored and aggregated all the "
            "same (for scripts and CI).",
        ),
    ] = False,
) -> None:
    """Run every agent on every task several times, then aggregate the scores with
    bootstrap confidence intervals (rliable: IQM, optimality gap, profiles)."""
    from ale_robotics.evalset import EvalSetRunner, load_spec

    logging.basicConfig(level=logging.WARNING)
    spec = load_spec(spec_path)
    name = spec.set_name(spec_path)
    _check_tasks(spec, spec_path)
    _check_agents(spec, spec_path)
    root = absolute(runs_root)
    assert root is not None
    runner = EvalSetRunner(spec, name, root, jobs=jobs, on_event=_progress)
    total = len(spec.tasks) * len(spec.agents) * spec.repetitions
    console.print(
        f"eval set {name}: {total} run(s) ({len(spec.tasks)} task(s) x {len(spec.agents)} "
        f"agent(s) x {spec.repetitions}), {runner.jobs} at a time, in {runner.root}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    try:
        outcome = runner.run()
    except KeyboardInterrupt:  # Ctrl-C before the runs started (the runner handles it after)
        _interrupted_early("before any run started")
    if outcome.skipped:
        console.print(f"{outcome.skipped} run(s) were already completed: skipped", highlight=False)
    if outcome.stopped_by is not None:
        _stopped(name, outcome, total, as_json=as_json)
    agg, out_dir, written = _aggregate(spec, name, root)
    failed = outcome.not_completed
    agent_failed = outcome.agent_failed if strict else []
    code = 1 if failed or agent_failed else 0
    if as_json:
        emit_json(
            {
                "set": name,
                "set_dir": str(outcome.root),
                "stopped_by": None,
                "exit_code": code,
                "runs": _runs_json(outcome),
                "aggregate": agg.model_dump(mode="json"),
                "out": str(out_dir),
                "files": [str(p) for p in written],
            }
        )
    else:
        _print_tables(agg)
    console.print(
        f"aggregate: {out_dir} ({', '.join(p.name for p in written)})",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    _say_not_completed(failed, agent_failed, total)
    raise typer.Exit(code)


def _stopped(name: str, outcome: SetOutcome, total: int, *, as_json: bool) -> NoReturn:
    """A set the operator stopped (Ctrl-C, SIGTERM) once its runs started: say how far it
    got and exit 128 + the signal, without an aggregate (a rerun resumes it)."""
    assert outcome.stopped_by is not None
    done = len(outcome.completed)
    console.print(
        f"[yellow]interrupted ({outcome.stopped_by}):[/yellow] {done} of {total} run(s) "
        "completed; run the same command again to resume (completed runs are kept)",
        highlight=False,
        soft_wrap=True,
    )
    code = 128 + signal.Signals[outcome.stopped_by].value
    if as_json:
        emit_json(
            {
                "set": name,
                "set_dir": str(outcome.root),
                "stopped_by": outcome.stopped_by,
                "exit_code": code,
                "runs": _runs_json(outcome),
                "aggregate": None,
                "out": None,
            }
        )
    raise typer.Exit(code)


def _aggregate(
    spec: EvalSetSpec, name: str, root: Path
) -> tuple[EvalSetAggregate, Path, list[Path]]:
    """The set's aggregate over its completed runs, written to its out dir: (aggregate,
    out dir, files written). Ctrl-C here keeps every run and exits as interrupted."""
    from ale_robotics.evalset import (
        aggregate,
        collect_scored_runs,
        default_out_dir,
        write_aggregate,
    )

    out_dir = absolute(default_out_dir(spec, name, root))
    assert out_dir is not None
    try:
        agg = aggregate(spec, name, collect_scored_runs(spec, name, root))
        written = write_aggregate(agg, out_dir)
    except KeyboardInterrupt:  # the runs are kept; only the aggregate is missing
        _interrupted_early("while aggregating (every run is kept)")
    return agg, out_dir, written


def _say_not_completed(
    failed: list[RunOutcome], agent_failed: list[RunOutcome], total: int
) -> None:
    """The runs that make the exit code 1: those that did not complete and, with --strict,
    those whose agent ended in error without submitting."""
    if failed:
        console.print(
            f"[red]{len(failed)} of {total} run(s) did not complete[/red] (the aggregate "
            "leaves them out); see their logs above, fix the cause, and run the same "
            "command again to redo only those",
            highlight=False,
            soft_wrap=True,
        )
    if agent_failed:
        console.print(
            f"[red]--strict:[/red] in {len(agent_failed)} of {total} run(s) the agent ended "
            "in error without submitting (scored and aggregated all the same): "
            + ", ".join(o.slot.key for o in agent_failed),
            highlight=False,
            soft_wrap=True,
        )
