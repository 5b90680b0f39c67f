"""``ale-robotics tasks`` and ``registry``: the registered tasks and the release manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ale_robotics.cli.app import emit_json, friendly, out, registry_app, tasks_app

__all__: list[str] = []


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead.")]
StateDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        metavar="DIR",
        help="The evaluator state dir whose task library holds the papers (default: the "
        "embedded evaluator's, as 'run' uses).",
    ),
]


@tasks_app.command("list")
@friendly
def tasks_list(as_json: JsonOpt = False) -> None:
    """All registered tasks: id, mode, primary metric and direction, paper target.

    The table fits 80 columns and never cuts a task id; a target's statistic, source
    and what is not comparable are in 'tasks show ID'. With --json, one document:
    {"manifest": where the targets come from, "tasks": [{"id", "mode", "metric",
    "direction", "superseded_by": null or the newer version's id, "target": null or
    {"value", "statistic", "statistic_label", "confidence", "paper", "location"}}]}.
    A superseded task (an older version kept to re-run its recorded runs) is listed and
    named under the table with its newer version.
    Exit codes: 0 ok, 2 a usage error (an unusable manifest).
    """
    from ale_robotics.tasks import default_registry
    from ale_robotics.tasks.manifest import active_manifest

    reg = default_registry()
    _, origin = active_manifest()
    rows: list[dict[str, Any]] = []
    for entry in reg:
        spec = entry.spec
        target = reg.target(spec.id)
        rows.append(
            {
                "id": spec.id,
                "mode": spec.mode.value,
                "metric": spec.primary_metric.name,
                "direction": spec.primary_metric.direction.value,
                "superseded_by": reg.superseded_by(spec.id),
                "target": None
                if target is None
                else {
                    "value": target.value,
                    "statistic": target.statistic.value,
                    "statistic_label": target.statistic.label,
                    "confidence": target.confidence,
                    "paper": target.source.paper,
                    "location": target.source.location,
                },
            }
        )
    if as_json:
        emit_json({"manifest": origin, "tasks": rows})
        return
    _print_task_table(rows, origin)


def _print_task_table(rows: list[dict[str, Any]], origin: str) -> None:
    from rich import box
    from rich.text import Text

    caption = (
        f"targets from {origin}; ≈: approximate (derived from published data); "
        "'tasks show ID': the target's statistic, source and what is not comparable"
    )
    if any(r["superseded_by"] for r in rows):
        caption += (
            "; *: superseded by a newer -vN of the task, kept to re-run its recorded runs "
            "(scores compare within a version)"
        )
    table = Table(
        title="ALE Robotics tasks",
        caption=Text(caption),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    # Ids are what a user copies into the next command: never cut, never wrapped;
    # the other columns give way first.
    widest = max((len(r["id"]) for r in rows), default=4)
    table.add_column("task", no_wrap=True, min_width=widest)
    for col in ("mode", "metric", "target"):
        table.add_column(col, overflow="fold")
    for row in rows:
        arrow = "↑" if row["direction"] == "higher_is_better" else "↓"
        target = row["target"]
        shown = "not synced"
        if target is not None:
            approx = "≈" if target["confidence"] == "approximate" else ""
            shown = f"{approx}{target['value']:g}"
        mode = f"{row['mode']} *" if row["superseded_by"] else row["mode"]
        table.add_row(Text(row["id"]), Text(mode), Text(f"{row['metric']} {arrow}"), Text(shown))
    out.print(table)


@tasks_app.command("show")
@friendly
def tasks_show(
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="Task id.")],
    as_json: JsonOpt = False,
    state_dir: StateDirOpt = None,
) -> None:
    """One task as a page: what it is (mode, env, paper), its target with the statistic,
    source and what is not comparable, the budgets, what to submit (the contract's files,
    and each tensor's key, shape, dtype and bounds) or what is measured, the metrics, the
    brief's first lines, and the papers an operator attached.

    With --json, one document: {"task": the config, "manifest": its entry (target,
    budgets) or null, "config_sha256", "target_statistic": null or {"name",
    "description"}, "paper_library": the folder 'tasks attach-paper' copies into,
    "papers": [{"name", "original_name", "bytes", "sha256", "media_type",
    "attached_at"}]}.

    Exit codes: 0 ok, 2 a usage error (an unknown task id).
    """
    from dataclasses import asdict

    from ale_robotics.tasks import default_registry
    from ale_robotics.tasks.papers import default_state_dir, list_papers, paper_dir

    reg = default_registry()
    spec = reg.get(task_id)
    entry = reg.manifest_entry(task_id)
    target = entry.target if entry else None
    root = (state_dir or default_state_dir()).absolute()
    papers = list_papers(root, spec.id)
    if as_json:
        emit_json(
            {
                "task": spec.model_dump(mode="json"),
                "manifest": entry.model_dump(mode="json") if entry else None,
                "config_sha256": reg.entry(task_id).sha256,
                "target_statistic": None
                if target is None
                else {"name": target.statistic.value, "description": target.statistic.description},
                "paper_library": str(paper_dir(root, spec.id)),
                "papers": [asdict(p) for p in papers],
            },
            indent=2,
        )
        return
    from ale_robotics.cli.task_page import print_task_page
    from ale_robotics.tasks.brief import render_brief

    print_task_page(
        spec,
        entry,
        statistic=None if target is None else target.statistic.description,
        brief=render_brief(spec, entry),
        config_sha256=reg.entry(task_id).sha256,
        papers=papers,
        paper_library=str(paper_dir(root, spec.id)),
    )


@tasks_app.command("brief")
@friendly
def tasks_brief(
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="Task id.")],
    as_json: JsonOpt = False,
) -> None:
    """The task brief (Markdown), as GetSpec serves it and the agent reads it in
    $ALE_TASK_DIR/brief.md: the goal, the paper's method and protocol, the contract,
    budgets, how the score is computed, what the gate checks and how to submit.

    With --json, one document: {"task_id", "brief"}.
    Exit codes: 0 ok, 2 a usage error (an unknown task id).
    """
    from ale_robotics.tasks import default_registry
    from ale_robotics.tasks.brief import render_brief

    reg = default_registry()
    spec = reg.get(task_id)
    brief = render_brief(spec, reg.manifest_entry(task_id))
    if as_json:
        emit_json({"task_id": spec.id, "brief": brief})
        return
    typer.echo(brief, nl=False)


@tasks_app.command("attach-paper")
@friendly
def tasks_attach_paper(
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="Task id.")],
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE...", help="Paper files: PDF, Markdown or text."),
    ],
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy paper files into the task library of the state dir; every later run of the
    task finds them, read-only, in $ALE_TASK_DIR/paper/ (the project ships no papers).

    Accepted: .pdf (with a PDF header), .md/.markdown/.txt (UTF-8 text), each at most
    50 MiB. Names are sanitized; a name already attached is replaced; each file's
    SHA-256 is recorded in the library's index.json. A bad file attaches nothing.
    With --json: {"task_id", "paper_library", "attached": [...]}.
    Exit codes: 0 ok, 2 a usage error (an unknown task, a missing file, a wrong type).
    """
    from dataclasses import asdict

    from ale_robotics.tasks import default_registry
    from ale_robotics.tasks.papers import attach_papers, default_state_dir, paper_dir

    spec = default_registry().get(task_id)
    root = (state_dir or default_state_dir()).absolute()
    added = attach_papers(root, spec.id, [f.absolute() for f in files])
    where = paper_dir(root, spec.id)
    if as_json:
        emit_json(
            {
                "task_id": spec.id,
                "paper_library": str(where),
                "attached": [asdict(p) for p in added],
            }
        )
        return
    for p in added:
        typer.echo(f"attached {p.name} ({p.bytes:,} bytes, sha256 {p.sha256[:16]}...)")
    typer.echo(f"{spec.id}: {where}")


@registry_app.command("sync")
@friendly
def registry_sync(
    manifest: Annotated[
        Path, typer.Argument(metavar="MANIFEST", help="A release manifest JSON file.")
    ],
) -> None:
    """Check a release manifest against the installed task configs, then make it active.

    Exit codes: 0 synced, 2 a usage error (a manifest that does not match the configs).
    """
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
    typer.echo(
        f"synced manifest {loaded.release}: {len(loaded.tasks)} task(s), {scored} with a "
        f"sourced target -> {dest}"
    )
