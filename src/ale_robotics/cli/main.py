"""The ``ale-robotics`` command line.

Errors the user can act on (:class:`~ale_robotics.errors.AleError`) are printed
as one red line with exit code 2; nothing else is caught, so a bug still shows
its traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ale_robotics import __version__
from ale_robotics.errors import AleError

__all__ = ["app", "main"]

app = typer.Typer(
    name="ale-robotics",
    help="Evaluate AI agents on robotics tasks tied to published papers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
evaluator_app = typer.Typer(help="Run the trusted evaluator service.", no_args_is_help=True)
tasks_app = typer.Typer(help="List and inspect registered tasks.", no_args_is_help=True)
registry_app = typer.Typer(help="Manage the release manifest (targets, budgets).")
app.add_typer(evaluator_app, name="evaluator")
app.add_typer(tasks_app, name="tasks")
app.add_typer(registry_app, name="registry")

console = Console(stderr=True)
out = Console()

F = TypeVar("F", bound=Callable[..., Any])


def _friendly(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AleError as exc:
            console.print("[red]error:[/red] ", end="", highlight=False)
            console.print(exc.message, highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _register_trajectory() -> None:
    from ale_robotics.cli.trajectory import app as trajectory_app

    app.add_typer(trajectory_app, name="trajectory", help="Verify and show run trajectories.")


_register_trajectory()


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out.print(f"ale-robotics {__version__}")
        raise typer.Exit(0)


# ------------------------------------------------------------------- run ---


@app.command()
@_friendly
def run(
    task_id: Annotated[str, typer.Argument(help="Task id, e.g. td3-inverted-pendulum-v1.")],
    agent: Annotated[str, typer.Option("--agent", help="Command that starts the agent.")],
    run_dir: Annotated[
        Path | None, typer.Option(help="Run directory (default runs/<run_id>).")
    ] = None,
    evaluator: Annotated[
        str | None,
        typer.Option(help="Agent-channel address of a running evaluator (default: embedded)."),
    ] = None,
    evaluator_harness: Annotated[
        str | None, typer.Option(help="Harness-channel address of that evaluator.")
    ] = None,
    agent_token_file: Annotated[Path | None, typer.Option(help="Its agent.token.")] = None,
    harness_token_file: Annotated[Path | None, typer.Option(help="Its harness.token.")] = None,
    submission_dir: Annotated[
        Path | None, typer.Option(help="Submission volume shared with that evaluator.")
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="State dir of the embedded evaluator.")
    ] = None,
    budget: Annotated[
        float | None, typer.Option(help="Override the agent's wall-clock budget (seconds).")
    ] = None,
    sandbox: Annotated[
        str,
        typer.Option(
            help="Agent isolation: 'bwrap' (bubblewrap: no network, sees only its workspace "
            "and the submission dir), 'none' (not isolated), or 'auto' (bwrap if it can start)."
        ),
    ] = "auto",
    workspace: Annotated[
        Path | None,
        typer.Option(
            help="The agent's code and data, visible read-only (default: current directory). "
            "The agent works in runs/<run_id>/scratch."
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Rollout worker processes.")] = None,
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
) -> None:
    """Run an agent on a task and print its score (the last line starts with 'score:')."""
    from ale_robotics.client.sdk import JobStatus
    from ale_robotics.harness.host_guard import harden_harness_process
    from ale_robotics.harness.run import HarnessError, RunOptions, run_task
    from ale_robotics.tasks import default_registry

    logging.basicConfig(level=logging.WARNING)
    default_registry().get(task_id)  # an unknown id fails here, before any progress display
    if sandbox not in ("auto", "bwrap", "none"):
        raise typer.BadParameter("use 'auto', 'bwrap' or 'none'", param_hint="--sandbox")
    from ale_robotics.harness.sandbox import sandbox_available

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
        run_dir=_absolute(run_dir),
        runs_root=cwd / "runs",
        evaluator=evaluator,
        evaluator_harness=evaluator_harness,
        agent_token_file=_absolute(agent_token_file),
        harness_token_file=_absolute(harness_token_file),
        submission_volume=_absolute(submission_dir),
        state_dir=_absolute(state_dir),
        budget_s=budget,
        workers=workers,
        sandbox=sandbox,  # type: ignore[arg-type]  # checked above
        workspace=_absolute(workspace) or cwd,
        episodes=episodes,
        disk_quota_bytes=disk_quota_mib * 1024**2,
        log_cap_bytes=log_cap_mib * 1024**2,
        cpus=cpus,
        memory_bytes=None if memory_mib is None else memory_mib * 1024**2,
        pids_max=pids_max,
    )
    harden_harness_process()
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        agent_bar = progress.add_task("agent running", total=None)
        eval_bar: Any = None

        def show(phase: str, job: JobStatus | None, elapsed: float, budget_s: float) -> None:
            nonlocal eval_bar
            if phase == "agent":
                desc = f"agent running ({elapsed:.0f}s of {budget_s:.0f}s budget)"
                if job is not None:
                    desc += f", job {job.state.lower()}"
                progress.update(agent_bar, description=desc)
                return
            progress.update(agent_bar, description="agent finished", total=1, completed=1)
            if job is None:
                return
            if eval_bar is None:
                eval_bar = progress.add_task("evaluating on hidden seeds", total=job.episodes_total)
            progress.update(
                eval_bar,
                completed=job.episodes_done,
                total=job.episodes_total,
                description=f"evaluating on hidden seeds ({job.state.lower()})",
            )

        try:
            outcome = run_task(opts, on_progress=show)
        except HarnessError as exc:
            console.print("[red]run failed:[/red] ", end="", highlight=False)
            console.print(exc.message, highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(1) from None
    rep = outcome.report
    # The explanation quotes agent-controlled text (a rejected file's tensor key, say):
    # never parse it as rich markup.
    console.print(f"run dir: {outcome.run_dir}", highlight=False, markup=False)
    console.print(rep.score.explanation, highlight=False, markup=False)
    typer.echo(outcome.score_line)  # one line, never wrapped


# ------------------------------------------------------------- evaluator ---


@evaluator_app.command("serve")
@_friendly
def evaluator_serve(
    state_dir: Annotated[Path, typer.Option(help="Secret, tokens, keys, job store.")],
    agent_listen: Annotated[
        str | None, typer.Option(help="Agent listener (default unix://STATE_DIR/agent.sock).")
    ] = None,
    harness_listen: Annotated[
        str | None, typer.Option(help="Harness listener (default unix://STATE_DIR/harness.sock).")
    ] = None,
    agent_token_file: Annotated[Path | None, typer.Option(help="Agent token to accept.")] = None,
    harness_token_file: Annotated[
        Path | None, typer.Option(help="Harness token to accept.")
    ] = None,
    submission_dir: Annotated[
        Path | None, typer.Option(help="The shared submission volume.")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Serve only this task.")] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Accept only this run, with agent.token as its token. Without it the "
            "evaluator is shared: the harness opens each run (OpenRun), which gets a token and "
            "a directory SUBMISSION_DIR/<run_id>/ of its own."
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Rollout worker processes.")] = None,
    max_sessions: Annotated[
        int | None,
        typer.Option(help="Concurrent interactive sessions per run (overrides the tasks' limit)."),
    ] = None,
    max_sessions_total: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Concurrent interactive sessions of all runs together (default: 64, and at "
            "least the per-run limit).",
        ),
    ] = None,
) -> None:
    """Serve AleEnv on two listeners until interrupted (Ctrl-C or SIGTERM)."""
    from ale_robotics.evaluator import EvaluatorConfig, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    running = serve(
        EvaluatorConfig(
            state_dir,
            submission_dir,
            task_id=task,
            run_id=run_id,
            workers=workers,
            max_sessions=max_sessions,
            max_sessions_total=max_sessions_total,
            # shared: each run's agent uses the token OpenRun issued for it
            per_run_tokens=run_id is None,
        ),
        agent_listen=agent_listen,
        harness_listen=harness_listen,
        agent_token_file=agent_token_file,
        harness_token_file=harness_token_file,
    )
    if run_id is None:
        tokens = (
            f"  harness token: {state_dir / 'harness.token'} (unless given)\n"
            "  runs: shared; the harness opens each run (OpenRun) and gets its agent token;\n"
            f"  {state_dir / 'agent.token'} reads GetSpec and practice sessions outside runs only"
        )
    else:
        tokens = (
            f"  run {run_id}; tokens: {state_dir / 'agent.token'} and "
            f"{state_dir / 'harness.token'} (unless given)"
        )
    console.print(
        f"evaluator {__version__} serving\n  agent channel:   {running.agent_address}\n"
        f"  harness channel: {running.harness_address}\n{tokens}",
        highlight=False,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    running.stop()


# ----------------------------------------------------------- agent side ---


@app.command()
@_friendly
def submit(
    path: Annotated[
        Path, typer.Argument(help="Submission directory (inside ALE_SUBMISSION_DIR).")
    ] = Path("."),
    wait: Annotated[bool, typer.Option(help="Wait for a terminal state.")] = False,
    client_token: Annotated[
        str | None, typer.Option(help="Idempotency key; retrying with it never makes 2 jobs.")
    ] = None,
) -> None:
    """Submit a batch artifact (for shell-script agents; uses the ALE_* variables)."""
    from ale_robotics.client import AleClient

    with AleClient.from_env() as client:
        job_id = client.submit(path, client_token=client_token)
        out.print(job_id)
        if wait:
            st = client.wait(job_id)
            out.print(json.dumps(_status_dict(st)))


@app.command()
@_friendly
def status(
    job_id: Annotated[str, typer.Argument(help="Job id (default: this run's newest).")] = "",
) -> None:
    """Print a batch job's state and progress as JSON (never a metric)."""
    from ale_robotics.client import AleClient

    with AleClient.from_env() as client:
        out.print(json.dumps(_status_dict(client.status(job_id))))


def _status_dict(st: Any) -> dict[str, Any]:
    return {
        "job_id": st.job_id,
        "state": st.state,
        "episodes_done": st.episodes_done,
        "episodes_total": st.episodes_total,
        "queue_position": st.queue_position,
        "failure_source": st.failure_source,
        "failure_reason": st.failure_reason,
    }


# ----------------------------------------------------------------- audit ---


@app.command()
@_friendly
def audit(
    run_dir: Annotated[Path, typer.Argument(help="The run directory (holds result.json).")],
    secret: Annotated[Path, typer.Option(help="The revealed evaluator secret file.")],
    submission: Annotated[
        Path | None,
        typer.Option(help="The evaluated submission files (default RUN_DIR/submission)."),
    ] = None,
    public_key: Annotated[
        str | None, typer.Option(help="Expected evaluator public key (hex, or a key file).")
    ] = None,
) -> None:
    """Check result.json against the signed trajectory, recompute seeds, re-run, re-score.

    Details quote agent-controlled text (file names, job ids), so everything is
    printed with rich markup off: a name like ``[/x]`` is text, not a tag.
    """
    from rich.text import Text

    from ale_robotics.audit import audit_run, read_secret
    from ale_robotics.trajectory import load_public_key

    try:
        revealed = read_secret(secret)
    except OSError as exc:
        console.print(f"error: cannot read the secret file {secret}: {exc}", markup=False)
        raise typer.Exit(2) from None
    key = None if public_key is None else load_public_key(public_key)
    report = audit_run(run_dir, revealed, submission_dir=submission, public_key=key)
    if report.fatal is not None:
        console.print(f"error: audit failed: {report.fatal}", markup=False, soft_wrap=True)
        raise typer.Exit(1)
    table = Table(title=Text(f"audit of {report.run_id}"))
    table.add_column("check")
    table.add_column("")
    table.add_column("detail")
    for c in report.checks:
        verdict = Text("ok", style="green") if c.ok else Text("FAIL", style="red")
        table.add_row(Text(c.name), verdict, Text(c.detail))
    out.print(table)
    if not report.ok:
        failed = ", ".join(c.name for c in report.checks if not c.ok)
        out.print(f"audit FAILED: {failed}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    out.print("audit OK: seeds, commitments, trajectory and metrics all check out")


@evaluator_app.command("public-key")
@_friendly
def evaluator_public_key(
    state_dir: Annotated[Path, typer.Option(help="The evaluator's state dir.")],
) -> None:
    """Print the evaluator's Ed25519 public key (hex), for 'trajectory verify --public-key'."""
    from ale_robotics.evaluator.state import StateDir
    from ale_robotics.trajectory import EvaluatorSigner

    out.print(EvaluatorSigner.load_or_create(StateDir(state_dir).signing_key_path).public_key_hex)


# ----------------------------------------------------------------- tasks ---


@tasks_app.command("list")
@_friendly
def tasks_list() -> None:
    """All registered tasks with mode, metric and direction, target, its statistic and source."""
    from rich import box
    from rich.text import Text

    from ale_robotics.tasks import default_registry
    from ale_robotics.tasks.manifest import active_manifest

    reg = default_registry()
    _, origin = active_manifest()
    table = Table(
        title="ALE Robotics tasks",
        caption=Text(
            f"targets from {origin}; [n]: the target's statistic and source, below; "
            "'tasks show ID': what is not comparable"
        ),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("task", no_wrap=True)
    for col in ("mode", "metric", "target"):
        table.add_column(col)
    sources: list[Text] = []
    for entry in reg:
        spec = entry.spec
        target = reg.target(spec.id)
        arrow = "↑" if spec.primary_metric.direction.value == "higher_is_better" else "↓"
        shown = "not synced"
        if target is not None:
            approx = ", approximate" if target.confidence == "approximate" else ""
            sources.append(
                Text(
                    f"[{len(sources) + 1}] {spec.id}: {target.value:g}, "
                    f"{target.statistic.label}{approx}; {target.source.paper}: "
                    f"{target.source.location}"
                )
            )
            shown = f"{target.value:g} [{len(sources)}]"
        table.add_row(
            Text(spec.id),
            Text(spec.mode.value),
            Text(f"{spec.primary_metric.name} {arrow}"),
            Text(shown),
        )
    out.print(table)
    for line in sources:
        out.print(line)


@tasks_app.command("show")
@_friendly
def tasks_show(task_id: Annotated[str, typer.Argument(help="Task id.")]) -> None:
    """The full task config and its manifest entry (target, statistic, what is not
    comparable), as JSON."""
    from ale_robotics.tasks import default_registry

    reg = default_registry()
    spec = reg.get(task_id)
    entry = reg.manifest_entry(task_id)
    target = entry.target if entry else None
    out.print_json(
        json.dumps(
            {
                "task": spec.model_dump(mode="json"),
                "manifest": entry.model_dump(mode="json") if entry else None,
                "config_sha256": reg.entry(task_id).sha256,
                "target_statistic": None
                if target is None
                else {"name": target.statistic.value, "description": target.statistic.description},
            }
        )
    )


@registry_app.command("sync")
@_friendly
def registry_sync(
    manifest: Annotated[Path, typer.Argument(help="A release manifest JSON file.")],
) -> None:
    """Check a release manifest against the installed task configs, then make it active."""
    import shutil

    from ale_robotics.tasks import Registry
    from ale_robotics.tasks.manifest import load_manifest, synced_manifest_path

    loaded = load_manifest(manifest)
    Registry.bundled(loaded).check_manifest(loaded)
    dest = synced_manifest_path()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    shutil.copyfile(manifest, tmp)
    tmp.replace(dest)
    scored = sum(1 for e in loaded.tasks.values() if e.target is not None)
    out.print(
        f"synced manifest {loaded.release}: {len(loaded.tasks)} task(s), {scored} with a "
        f"sourced target -> {dest}"
    )


def _absolute(path: Path | None) -> Path | None:
    return None if path is None else path.absolute()


def main() -> None:
    """The console entry point: never import from the working directory (see host_guard)."""
    from ale_robotics.harness.host_guard import safe_sys_path, working_directory

    sys.path[:] = safe_sys_path(sys.path, working_directory())
    os.environ["PYTHONSAFEPATH"] = "1"
    app()
