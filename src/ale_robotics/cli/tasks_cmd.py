"""``ale-robotics tasks`` and ``registry``: the registered tasks and the release manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ale_robotics.cli.app import friendly, out, registry_app, tasks_app

__all__: list[str] = []


@tasks_app.command("list")
@friendly
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
@friendly
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
@friendly
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
