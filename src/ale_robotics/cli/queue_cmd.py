"""``ale-robotics evaluator queue``: the jobs waiting and running in an evaluator's store.

What an operator of shared evaluators asks first (which jobs wait, which replica runs
which, whose lease is running out, what was retried), answered without ``psql`` or
``sqlite3``. Read only: the store is opened by :func:`.store.views.open_view`, which
creates and migrates nothing, so a mistyped path is one line, never a new empty store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from ale_robotics.cli.app import emit_json, evaluator_app, friendly, out
from ale_robotics.paths import state_home

__all__: list[str] = []


def _age(seconds: float) -> str:
    """``42s``, ``7m``, ``3h``, ``2d``: short enough for an 80-column table."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds), 0)}s"


def _rows(state_dir: Path | None, store: str | None) -> list[dict[str, Any]]:
    """The QUEUED and RUNNING jobs of the store, as the JSON document lists them."""
    from ale_robotics.evaluator.store.views import open_view

    where: str | Path = store if store is not None else _default_store(state_dir)
    with open_view(where) as view:
        jobs, now = view.active(), view.now()
    return [
        {
            "job_id": job.job_id,
            "run_id": job.run_id,
            "task_id": job.task_id,
            "state": job.state.value,
            "owner": job.owner,
            "lease_left_s": round(max(job.lease_until - now, 0.0), 1)
            if job.state.value == "RUNNING"
            else None,
            "attempts": job.attempts,
            "episodes_done": job.episodes_done,
            "episodes_total": job.episodes_total,
            "created_unix": job.created,
            "age_s": round(max(now - job.created, 0.0), 1),
        }
        for job in jobs
    ]


def _default_store(state_dir: Path | None) -> Path:
    root = state_dir if state_dir is not None else state_home() / "evaluator"
    return root.absolute() / "jobs.sqlite3"


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column("job", no_wrap=True)
    table.add_column("run", overflow="fold")
    table.add_column("task", overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("owner", overflow="fold")
    table.add_column("lease", justify="right", no_wrap=True)
    table.add_column("try", justify="right", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    for r in rows:
        lease = "-" if r["lease_left_s"] is None else f"{r['lease_left_s']:.0f}s"
        table.add_row(
            r["job_id"],
            r["run_id"],
            r["task_id"],
            r["state"],
            r["owner"] or "-",
            lease,
            str(r["attempts"]),
            _age(r["age_s"]),
        )
    return table


@evaluator_app.command("queue")
@friendly
def evaluator_queue(
    state_dir: Annotated[
        Path | None,
        typer.Option(
            help="The evaluator's state dir, whose jobs.sqlite3 is read (default: "
            "STATE_HOME/evaluator, as 'evaluator serve').",
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help="The job store instead: a SQLite file path or postgresql://... (as "
            "'evaluator serve --store').",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON document on stdout: {"jobs": [...]}.'),
    ] = False,
) -> None:
    """List the QUEUED and RUNNING jobs, oldest first: run, task, owner (the evaluator
    process holding it: host:pid:tag), seconds left on its lease, attempts, age.

    Read only: nothing is created or migrated; a store that does not exist is an error.
    """
    rows = _rows(state_dir, store)
    if as_json:
        emit_json({"jobs": rows})
        return
    if not rows:
        out.print("no job queued or running", highlight=False)
        return
    out.print(_table(rows))
    queued = sum(1 for r in rows if r["state"] == "QUEUED")
    out.print(f"{queued} queued, {len(rows) - queued} running", highlight=False)
