"""``ale-robotics tasks show ID``: one task as a page a person reads at 80 columns.

What a user looks up before writing an agent, in the order they need it: what the task
is (mode, env, the paper), the target the score divides by with its source and what is
not comparable about it, the budgets, what to submit (the contract's files, and every
tensor's key, shape, dtype and bounds as a table) or that an eval session is measured
instead, the metrics, and the first lines of the brief the agent is given. The whole
config and manifest entry are ``--json``'s (:mod:`.tasks_cmd`).

Apart from :mod:`.tasks_cmd` (arguments and the JSON document) so that the page's
layout is in one place. Ids, keys and shapes are never cut; prose wraps between words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ale_robotics.cli.app import out

if TYPE_CHECKING:
    from ale_robotics.tasks.manifest import ManifestEntry, PaperTarget
    from ale_robotics.tasks.papers import AttachedPaper
    from ale_robotics.tasks.spec import TaskSpec

__all__ = ["BRIEF_CHARS", "print_task_page"]

BRIEF_CHARS = 700
"""About how much of the brief the page shows (its first paragraphs, whole); 'tasks brief
ID' prints it all."""
_INDENT = 2


def _facts(rows: list[tuple[str, str | Text]]) -> Table:
    """A two-column table of facts: names (never wrapped), values wrapped between words."""
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for name, value in rows:
        table.add_row(name, value if isinstance(value, Text) else Text(value))
    return table


def _grid(*headers: str, wrap: tuple[str, ...] = ()) -> Table:
    """A table with a header rule; only the columns in ``wrap`` may wrap."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for header in headers:
        if header in wrap:
            table.add_column(header, overflow="fold")
        else:
            table.add_column(header, no_wrap=True)
    return table


def _section(title: str, *body: object) -> None:
    out.print()
    out.print(Text(title, style="bold underline"))
    out.print(Padding(Group(*body), (0, 0, 0, _INDENT)))  # type: ignore[arg-type]


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def _duration(seconds: float) -> str:
    """'4 h', '1 h 30 min', '20 min', '45 s'."""
    if seconds < 60:
        return f"{_num(seconds)} s"
    minutes = round(seconds / 60)
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def _arrow(direction: str) -> str:
    return "↑ higher is better" if direction == "higher_is_better" else "↓ lower is better"


def _about(spec: TaskSpec, superseded_by: str | None) -> Table:
    mode = (
        "batch: the agent submits files, the evaluator runs them on hidden seeds"
        if spec.mode.value == "batch"
        else "interactive: the agent plays an eval session over gRPC, on hidden seeds"
    )
    paper = spec.paper
    cite = paper.citation or f"{paper.authors} {paper.year}"
    rows: list[tuple[str, str | Text]] = [
        ("mode", mode),
        ("genre", spec.genre),
        ("env", f"{spec.env.gym_id} ({spec.simulator.name}), at most "
                f"{spec.env.max_episode_steps:,} steps an episode"),
        ("evaluation", f"{spec.eval.evaluated_episodes} episodes on hidden seeds, rollout "
                       f"kind {spec.eval.rollout}"),
        ("paper", f"{paper.title} ({cite})" + (f", {paper.url}" if paper.url else "")),
    ]  # fmt: skip
    if superseded_by is not None:
        rows.append(
            ("superseded", Text(f"by {superseded_by}: new runs should use it", style="yellow"))
        )
    return _facts(rows)


def _target(spec: TaskSpec, target: PaperTarget | None, statistic: str | None) -> list[object]:
    primary = spec.primary_metric
    if target is None:
        return [
            Text(
                f"not synced: the task is unscored (its {primary.name} is measured and shown, "
                "never divided by a paper value)"
            )
        ]
    approx = " (approximate: derived from published data)" if target.confidence == (
        "approximate") else ""  # fmt: skip
    source = target.source
    where = source.location + (f", page {source.page}" if source.page else "")
    value = f"{primary.name} {_num(target.value)}{approx}, {_arrow(primary.direction)}"
    rows: list[tuple[str, str | Text]] = [
        ("value", value),
        ("statistic", statistic or target.statistic.value),
        ("paper", source.paper),
        ("where", where),
    ]  # fmt: skip
    if source.data_commit:
        rows.append(("data commit", source.data_commit))
    how = "paper / measured" if primary.direction.value == "lower_is_better" else "measured / paper"
    rows.append(("score", f"{how}, clamped to [0, {_num(spec.scoring.cap)}]; 1.000 = the paper"))
    body: list[object] = [_facts(rows)]
    if target.comparability is not None and target.comparability.notes:
        body.append(Text("Not comparable with the paper:", style="bold"))
        body.append(_bullets(target.comparability.notes))
    return body


def _bullets(items: list[str]) -> Table:
    """A list, each item's lines under its first word (a hanging indent)."""
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for item in items:
        table.add_row("-", Text(item))
    return table


def _budget(spec: TaskSpec, entry: ManifestEntry | None) -> list[object]:
    from ale_robotics.tasks.registry import budget_for

    if entry is None:
        return [Text("the release manifest has no entry for this task: no budget is set")]
    cb = entry.compute_budget
    rows: list[tuple[str, str | Text]] = [
        ("wall clock", f"{_duration(cb.wall_clock_s)} for the agent")
    ]
    training = budget_for(spec, entry)
    rows.append(("training", training.describe() if training is not None else "no budget set"))
    if spec.mode.value == "batch":
        rows.append(("submissions", f"at most {cb.max_submissions} a run"))
    rows.append(("CPUs", "all" if cb.cpus is None else _num(cb.cpus)))
    rows.append(
        ("memory", "all" if cb.memory_bytes is None else f"{cb.memory_bytes / 2**20:,.0f} MiB")
    )
    if cb.model_tokens is not None:
        rows.append(("model tokens", f"{cb.model_tokens:,} (input + output)"))
    return [_facts(rows)]  # fmt: skip


def _contract(spec: TaskSpec) -> list[object]:
    contract = spec.contract
    if contract is None:
        return [
            Text(
                "no files: the evaluator measures the episodes of the agent's eval session "
                "(it simulates them itself)"
            )
        ]
    body: list[object] = [
        Text(
            f"Write into $ALE_SUBMISSION_DIR (the sandbox's own path; the SDK's "
            f"client.submission_dir), at most {contract.max_total_bytes:,} bytes in all:"
        )
    ]
    files = _grid("role", "file", "format", "required", "max bytes")
    for f in contract.files:
        for i, (name, fmt) in enumerate(f.names.items()):
            first = i == 0
            files.add_row(
                f.role if first else "",
                Text(name),
                fmt.value,
                ("yes" if f.required else "no") if first else "",
                f"{f.max_bytes:,}" if first else "",
            )
    body.append(files)
    if any(len(f.names) > 1 for f in contract.files):
        body.append(Text("(one file of each role: any one of its names)"))
    if contract.tensors:
        body.append(Text(""))
        body.append(Text("Tensors: exactly these keys, none missing, none extra, finite:"))
        tensors = _grid("key", "shape", "dtype", "bounds")
        for t in contract.tensors:
            bounds = ""
            if t.low is not None or t.high is not None:
                low = "-inf" if t.low is None else f"{t.low:g}"
                high = "inf" if t.high is None else f"{t.high:g}"
                bounds = f"[{low}, {high}]"
            tensors.add_row(Text(t.key), f"[{', '.join(map(str, t.shape))}]", t.dtype, bounds)
        body.append(tensors)
    if contract.notes:
        body.append(Text(""))
        body.append(Text(contract.notes))
    return body


def _metrics(spec: TaskSpec) -> list[object]:
    table = _grid("metric", "role", "better", "unit", "what", wrap=("what",))
    for m in spec.metrics:
        better = "higher" if m.direction.value == "higher_is_better" else "lower"
        table.add_row(Text(m.name), m.role.value, better, m.unit or "-", Text(m.description))
    return [table]


def _brief(brief: str, task_id: str) -> list[object]:
    """The brief from its first section (its goal: the title and the lines above it say
    what this page says already), each paragraph wrapped as one (the Markdown's line
    breaks are not the page's), up to about :data:`BRIEF_CHARS`; and where the rest is."""
    blocks = [" ".join(b.split()) for b in brief.split("\n\n") if b.strip()]
    first = next((i for i, b in enumerate(blocks) if b.startswith("## ")), 0)
    shown: list[str] = []
    for block in blocks[first:]:
        prose = [b for b in shown if not b.startswith("#")]
        if prose and sum(map(len, shown)) + len(block) > BRIEF_CHARS:
            break  # the first paragraph is shown whole, however long
        shown.append(block)
    while shown and shown[-1].startswith("#"):  # never end on a heading
        shown.pop()
    body: list[object] = [
        Text(b.lstrip("# "), style="bold") if b.startswith("#") else Text(b) for b in shown
    ]
    body.append(Text(f"... the whole brief: 'ale-robotics tasks brief {task_id}'", style="dim"))
    return body


def print_task_page(
    spec: TaskSpec,
    entry: ManifestEntry | None,
    *,
    statistic: str | None,
    brief: str,
    config_sha256: str,
    papers: list[AttachedPaper],
    paper_library: str,
) -> None:
    """The page (module docstring) on stdout."""
    out.print(Text(spec.id, style="bold"), Text(f"  {spec.title}"))
    out.print(Padding(_about(spec, entry.superseded_by if entry else None), (0, 0, 0, _INDENT)))
    _section("Target", *_target(spec, entry.target if entry else None, statistic))
    _section("Budget", *_budget(spec, entry))
    _section("What to submit" if spec.contract else "What is measured", *_contract(spec))
    _section("Metrics", *_metrics(spec))
    _section("Brief (what the agent is given)", *_brief(brief, spec.id))
    attached = ", ".join(p.name for p in papers) or "none ('ale-robotics tasks attach-paper')"
    out.print()
    out.print(
        _facts(
            [
                ("papers", f"{attached}; the agent reads them in $ALE_TASK_DIR/paper/"),
                ("library", paper_library),
                ("config", f"sha256 {config_sha256}"),
                ("--json", "the whole config and manifest entry, as one document"),
            ]
        )
    )
