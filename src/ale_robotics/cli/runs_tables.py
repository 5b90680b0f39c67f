"""The tables and messages of ``ale-robotics runs list|show|compare`` and ``leaderboard``.

Apart from :mod:`.runs_cmd` (arguments, run lookup, ``--json`` documents and exit codes)
so that each command there reads as its steps, and what a person sees of runs is in one
place: tables that fit 80 columns and never cut a run id (what a user copies into the
next command), unverified runs marked, times in UTC.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from ale_robotics.cli.app import console, out
from ale_robotics.model.video import VIDEOS_DIR, VideoIndex
from ale_robotics.runs import Comparison, LeaderRow, RunIndex, RunSummary, spread
from ale_robotics.runs.compare import SCORE_DECIMALS, diff_text, fmt_fixed
from ale_robotics.runs.unfinished import UnfinishedRun
from ale_robotics.scoring.report import fmt_number

if TYPE_CHECKING:
    from ale_robotics.evalset.layout import SetPlace

__all__ = [
    "print_comparison",
    "print_leaderboard",
    "print_run",
    "print_run_list",
    "print_unverified",
    "print_warnings",
]


def _table(
    title: str | None = None, caption: str | None = None, *, show_header: bool = True
) -> Table:
    return Table(
        show_header=show_header,
        title=Text(title) if title else None,
        title_justify="left",
        caption=Text(caption) if caption else None,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )


def _when(t: dt.datetime, *, date_only: bool = False, year: bool = True) -> str:
    shown = ("%Y-%m-%d" if year else "%m-%d") + ("" if date_only else " %H:%M")
    return t.astimezone(dt.UTC).strftime(shown)


def _started_header(times: list[dt.datetime]) -> tuple[str, bool]:
    """('started 2026', False) when every time is of one year (then not repeated in
    each row: the label column keeps the room), else ('started', True)."""
    years = {t.astimezone(dt.UTC).year for t in times}
    return (f"started {years.pop()}", False) if len(years) == 1 else ("started", True)


def _score(s: RunSummary) -> str:
    if s.state != "completed":
        return "-"
    return "unscored" if s.score is None else f"{s.score:.{SCORE_DECIMALS}f}"


def _kind(s: RunSummary) -> Text:
    return Text("UNVERIFIED", style="bold red") if s.kind == "unverified" else Text(s.kind)


def _say_unverified(runs: list[RunSummary]) -> None:
    bad = [s for s in runs if s.kind == "unverified"]
    if bad:
        n = len(bad)
        console.print(
            f"{n} run{'s are' if n != 1 else ' is'} UNVERIFIED: result.json disagrees with "
            "the evaluator's signed events, so its score is a claim and never ranks "
            "('ale-robotics runs show RUN' says what disagrees)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def print_warnings(index: RunIndex) -> None:
    """What the index could not read or skipped, on stderr, before the tables."""
    for line in index.warnings:
        console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    for problem in index.problems():
        console.print(
            f"warning: skipped {problem.path}: {problem.reason}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def _print_unfinished(unfinished: Sequence[UnfinishedRun]) -> None:
    """The runs with no result.json: still running, or lost with their harness."""
    if not unfinished:
        return
    table = _table(f"not recorded: {len(unfinished)} run{'s' if len(unfinished) != 1 else ''}")
    table.add_column("run", no_wrap=True)
    table.add_column("task", overflow="fold")
    table.add_column("started", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for u in unfinished:
        state = Text("LOST", style="bold red") if u.state == "lost" else Text("running")
        started = (u.started_at or "?")[:16].replace("T", " ")
        table.add_row(Text(u.run_id), Text(u.task_id or "?"), started, state)
    out.print(table)
    if any(u.state == "lost" for u in unfinished):
        console.print(
            "LOST: the harness died (kill -9, host lost) before it recorded the run; nothing "
            "will finish it: run the task again (the directory keeps its trajectory)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def _by_task(runs: list[RunSummary]) -> dict[str, list[RunSummary]]:
    groups: dict[str, list[RunSummary]] = {}
    for s in runs:
        groups.setdefault(s.task_id, []).append(s)
    return dict(sorted(groups.items()))


def print_run_list(
    index: RunIndex,
    runs: list[RunSummary],
    task: str | None,
    unfinished: Sequence[UnfinishedRun] = (),
) -> None:
    """``runs list``'s tables: the index's warnings, one table per task (oldest run first),
    the unverified runs said apart, the runs not recorded (running or lost), and where to
    go next."""
    print_warnings(index)
    _print_unfinished(unfinished)
    if not runs:
        what = f" of {task}" if task else ""
        console.print(
            f"no runs{what} under {index.root} (ale-robotics run ... writes them to ./runs)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return
    widest = max(len(s.run_id) for s in runs)
    for task_id, group in _by_task(runs).items():
        n = len(group)
        table = _table(f"{task_id}: {n} run{'s' if n != 1 else ''}")
        header, year = _started_header([s.started_at for s in group])
        table.add_column("run", no_wrap=True, min_width=widest)
        table.add_column("label", overflow="fold")
        table.add_column(header, no_wrap=True)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        for s in group:
            table.add_row(
                Text(s.run_id),
                Text(s.label),
                _when(s.started_at, year=year),
                _score(s),
                _kind(s),
            )
        out.print(table)
    _say_unverified(runs)
    console.print(
        "times are UTC; only official completed runs rank ('ale-robotics leaderboard'); "
        "'ale-robotics runs show RUN' for one run",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def print_run(s: RunSummary, place: SetPlace | None, videos: VideoIndex | None = None) -> None:
    """``runs show``'s tables: the run's facts (with whether its result.json agrees with its
    signed events, its eval set place and its evaluation videos), then every metric."""
    table = _table(f"{s.run_id} ({s.task_id})", show_header=False)
    table.add_column("", no_wrap=True, style="bold")
    table.add_column("", overflow="fold")
    ranked = "ranked" if s.ranked else f"not ranked: {s.not_ranked_because}"
    if s.kind == "unverified":
        ranked = "never ranked: see below"
    rows: list[tuple[str, str]] = [
        ("label", s.label),
        ("kind", f"{s.kind} ({ranked})"),
        ("verified", _verified_text(s)),
        ("score", s.score_line or f"none: {s.reason}"),
        *([("eval set", f"{place.set_name}, repetition {place.rep}")] if place else []),
        ("started", f"{_when(s.started_at)} UTC"),
        ("wall", f"{s.wall_s:.1f} s"),
    ]
    if s.episode_values:
        values = s.episode_values
        sd = spread(values)
        rows.append(
            (
                "episodes",
                f"{len(values)} {s.primary_metric}: mean "
                f"{fmt_number(sum(values) / len(values))}, std {fmt_number(sd or 0.0)}, "
                f"min {fmt_number(min(values))}, max {fmt_number(max(values))}",
            )
        )
    if s.submission_sha256:
        rows.append(("sha256", s.submission_sha256))
    if s.evaluator_version:
        rows.append(("evaluator", s.evaluator_version))
    if s.simulator_versions:
        rows.append(("simulators", ", ".join(f"{k} {v}" for k, v in s.simulator_versions.items())))
    rows.append(("agent", s.agent_cmd))
    if s.inspect is not None:
        rows.append(("inspect", f"{s.inspect.model}, epoch {s.inspect.epoch}, log {s.inspect.log}"))
    rows.append(("dir", str(s.run_dir)))
    if videos is not None:
        rows.append(("videos", _videos_text(s, videos)))
    for key, value in rows:
        table.add_row(key, Text(value, style="bold red" if value.startswith("NO:") else ""))
    out.print(table)
    if s.metrics:
        metrics = _table()
        metrics.add_column("metric", no_wrap=True)
        metrics.add_column("value", justify="right", no_wrap=True)
        for name, measured in s.metrics.items():
            mark = " (primary)" if name == s.primary_metric else ""
            metrics.add_row(Text(name + mark), fmt_number(measured))
        out.print(metrics)


def _videos_text(s: RunSummary, index: VideoIndex) -> str:
    """Where the run's videos are and what each shows (or why there are none)."""
    parts = [
        f"{v.file} (episode {v.index}, {v.frames} frames at {v.fps} fps, return "
        f"{fmt_number(v.episode_return)}"
        + ("" if v.matches_official is not False else ", differs from the official episode")
        + ")"
        for v in index.videos
    ]
    where = f"in {s.run_dir / VIDEOS_DIR}: " if parts else ""
    why = f"; {index.error}" if index.error else ""
    return f"{where}{', '.join(parts) or 'none'}{why}"


def _verified_text(s: RunSummary) -> str:
    v = s.verification
    if v is None:
        return "not checked"
    if not v.verified:
        return "NO: result.json disagrees with the signed events: " + "; ".join(v.problems)
    key = (
        "pinned evaluator key"
        if v.key_pinned
        else "the key the trajectory publishes (pin it with --public-key)"
    )
    return f"yes: {', '.join(v.checks)} check out against the signed events, with {key}"


def print_comparison(c: Comparison) -> None:
    """``runs compare``'s tables: a legend of the runs, then every metric side by side with
    each run's difference to the first, then the comparison's notes."""
    legend = _table()
    legend.add_column("#", no_wrap=True)
    legend.add_column("run", no_wrap=True, min_width=max(len(r.run_id) for r in c.runs))
    legend.add_column("label", overflow="fold")
    legend.add_column("task", overflow="fold")
    for i, r in enumerate(c.runs, 1):
        legend.add_row(f"#{i}", Text(r.run_id), Text(r.label), Text(r.task_id))
    out.print(legend)
    table = _table(
        caption="Δ: difference to #1, at the precision shown ('same': smaller than it); "
        "primary metric: [95% bootstrap interval over the episodes] (paired when the runs "
        "played the same seeds); 'differs' when it excludes 0; --json for every digit"
    )
    table.add_column("metric", overflow="fold")
    for i in range(len(c.runs)):
        table.add_column(f"#{i + 1}", justify="right", overflow="fold")
    table.add_row("kind", *[_kind(r) for r in c.runs])
    for row in c.rows:
        cells = []
        for i in range(len(c.runs)):
            text = fmt_fixed(row.values[i], row.decimals)
            interval = row.intervals[i] if row.intervals else None
            extra = diff_text(row.diffs[i], row.decimals, interval)
            cells.append(f"{text}\nΔ {extra}" if extra else text)
        name = f"{row.metric} (primary)" if row.primary else row.metric
        table.add_row(Text(name), *cells)
    table.add_row(
        "episode std",
        *[
            "-" if sd is None else f"{fmt_number(sd)} (n={len(r.episode_values)})"
            for sd, r in zip(c.spreads, c.runs, strict=True)
        ],
    )
    out.print(table)
    for note in c.notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)


def print_unverified(runs: list[RunSummary]) -> None:
    """The unverified runs, apart from the ranking: what they claim, never a rank."""
    if not runs:
        return
    table = _table(
        "UNVERIFIED, not ranked: result.json disagrees with the signed events",
        caption="'ale-robotics runs show RUN' says what disagrees",
    )
    table.add_column("task", overflow="fold")
    table.add_column("label", overflow="fold")
    table.add_column("claims", justify="right", no_wrap=True)
    table.add_column("run", no_wrap=True, min_width=max(len(s.run_id) for s in runs))
    for s in runs:
        table.add_row(Text(s.task_id), Text(s.label), _score(s), Text(s.run_id))
    out.print(table)


def print_leaderboard(rows: list[LeaderRow], left_out: list[RunSummary], root: Path) -> None:
    """``leaderboard``'s tables: one per task, best run of each label first, and how many
    runs were left out of the ranking."""
    if not rows:
        console.print(
            f"nothing to rank under {root}: only official completed runs with a score rank "
            "(a full run of the task without --episodes)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    groups: dict[str, list[LeaderRow]] = {}
    for r in rows:
        groups.setdefault(r.task_id, []).append(r)
    widest = max((len(r.run_id) for r in rows), default=3)
    for task_id, group in groups.items():
        table = _table(task_id)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("label", overflow="fold")
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("runs", justify="right", no_wrap=True)
        table.add_column("best run", no_wrap=True, min_width=widest)
        table.add_column("started", no_wrap=True)
        for r in group:
            table.add_row(
                str(r.rank),
                Text(r.label),
                f"{r.score:.{SCORE_DECIMALS}f}",
                str(r.runs),
                Text(r.run_id),
                _when(r.started_at, date_only=True),
            )
        out.print(table)
    if left_out:
        n = len(left_out)
        console.print(
            f"{n} run{'s' if n != 1 else ''} not ranked (unverified, smoke, interrupted, "
            "failed, unofficial or unscored): 'ale-robotics runs list' shows them",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
