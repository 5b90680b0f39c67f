"""The tables and messages of ``ale-robotics runs list|show|compare`` and ``leaderboard``.

Apart from :mod:`.runs_cmd` (arguments, run lookup, ``--json`` documents and exit codes)
so that each command there reads as its steps, and what a person sees of runs is in one
place: tables that fit 80 columns and never cut a run id (what a user copies into the
next command), labels and task ids broken only between their words (after ``_``, ``-``,
``.`` or ``+``) when they do not fit, one number format per column (:mod:`ale_robotics.
runs.numbers`), messages wrapped at the terminal's width, unverified runs marked, times
in UTC, and the model's tokens and calls beside the score where a gateway counted them
(:mod:`.runs_cost`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from ale_robotics.cli.app import console, out
from ale_robotics.cli.runs_cost import COST_HEADER, cost_cells, cost_note, cost_width, model_text
from ale_robotics.model.video import VIDEOS_DIR, VideoIndex
from ale_robotics.runs import Comparison, LeaderRow, RunIndex, RunSummary, spread
from ale_robotics.runs.compare import SCORE_DECIMALS, SIGNIFICANT, diff_text, fmt_fixed
from ale_robotics.runs.numbers import column_decimals, fmt_column, fmt_significant, fmt_tokens
from ale_robotics.runs.unfinished import UnfinishedRun
from ale_robotics.scoring.report import fmt_number

if TYPE_CHECKING:
    from ale_robotics.evalset.layout import SetPlace

__all__ = [
    "print_comparison",
    "print_index_warnings",
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


_GAP = 2
"""Columns between two columns of these tables (no edge, padding collapsed)."""
_BREAK_AFTER = re.compile(r".*?(?:[_.+\-]|$)")
"""A label's or task id's pieces, each ending with the character it may break after."""


def _say(text: str) -> None:
    """A message on stderr, wrapped between words at the terminal's width."""
    console.print(text, highlight=False, markup=False)


def _broken(word: str, width: int) -> Text:
    """``word`` (a label, a task id: no spaces) on lines of at most ``width``, broken
    only after ``_ - . +``, so that no word of it is cut; a piece longer than a line is
    folded, the one case left."""
    lines: list[str] = []
    line = ""
    for piece in (p for p in _BREAK_AFTER.findall(word) if p):
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        while len(piece) > width:
            lines.append(piece[:width])
            piece = piece[width:]
        line += piece
    lines.append(line)
    return Text("\n".join(lines))


def _room(*fixed: int) -> int:
    """The width left on stdout for one column beside columns of widths ``fixed``."""
    return out.width - sum(fixed) - _GAP * len(fixed)


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
        _say(
            f"{n} run{'s are' if n != 1 else ' is'} UNVERIFIED: result.json disagrees with "
            "the evaluator's signed events, so its score is a claim and never ranks "
            "('ale-robotics runs show RUN' says what disagrees)"
        )


def print_index_warnings(warnings: Sequence[str]) -> None:
    """The run index's own warnings (its file was edited, its key is unusable), on stderr:
    with ``--json`` too, whose stdout is the document."""
    for line in warnings:
        _say(f"warning: {line}")


def print_warnings(index: RunIndex) -> None:
    """What the index could not read or skipped, on stderr, before the tables (and before
    a ``--json`` document, which has the skipped files as its "problems" too)."""
    print_index_warnings(index.warnings)
    for problem in index.problems():
        _say(f"warning: skipped {problem.path}: {problem.reason}")


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
        _say(
            "LOST: the harness died (kill -9, host lost) before it recorded the run; nothing "
            "will finish it: run the task again (the directory keeps its trajectory)"
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
        _say(f"no runs{what} under {index.root} (ale-robotics run ... writes them to ./runs)")
        return
    widest = max(len(s.run_id) for s in runs)
    for task_id, group in _by_task(runs).items():
        n = len(group)
        table = _table(f"{task_id}: {n} run{'s' if n != 1 else ''}")
        header, year = _started_header([s.started_at for s in group])
        started = [_when(s.started_at, year=year) for s in group]
        scores = [_score(s) for s in group]
        cost = cost_cells(group)  # model tokens and calls: only where some run has them
        score_w = max(len("score"), *map(len, scores))
        kind_w = max(len("kind"), *(len(s.kind) for s in group))
        label_w = max(len("label"), *(len(s.label) for s in group))
        when_w = max(len(header), *map(len, started))
        room = _room(widest, score_w, *cost_width(cost), kind_w, when_w)
        if label_w > room:  # the time goes under the date before a label is broken
            when_w = max(len(w) for w in (*header.split(), *" ".join(started).split()))
            room = _room(widest, score_w, *cost_width(cost), kind_w, when_w)
        label_w = max(len("label"), min(label_w, room))
        table.add_column("run", no_wrap=True, min_width=widest)
        table.add_column("label", no_wrap=True, width=label_w)
        table.add_column(header, width=when_w)
        table.add_column("score", justify="right", no_wrap=True)
        if cost:
            table.add_column(Text(COST_HEADER), width=cost_width(cost)[0], no_wrap=True)
        table.add_column("kind", no_wrap=True)
        for i, (s, when, score) in enumerate(zip(group, started, scores, strict=True)):
            table.add_row(
                Text(s.run_id), _broken(s.label, label_w), when, score, *cost[i : i + 1], _kind(s)
            )
        out.print(table)
    if any(s.model_tokens is not None for s in runs):
        _say(cost_note("the run"))
    _say_unverified(runs)
    _say(
        "times are UTC; a run ranks only when the evaluator measured what it was given "
        "under the task's full protocol (not smoke, no result, interrupted or failed): "
        "'ale-robotics leaderboard' ranks them, 'ale-robotics runs show RUN' shows one run"
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
    elif s.kind == "no result":
        ranked = "not ranked: the evaluator measured nothing"
    rows: list[tuple[str, str]] = [
        ("label", s.label),
        ("kind", f"{s.kind} ({ranked})"),
        ("verified", _verified_text(s)),
        ("score", s.score_line or f"none: {s.reason}"),
        ("model", model_text(s)),
        *([("eval set", f"{place.set_name}, repetition {place.rep}")] if place else []),
        ("started", f"{_when(s.started_at)} UTC"),
        ("wall", f"{s.wall_s:.1f} s"),
    ]
    if s.episode_values:
        values = s.episode_values
        stats = {
            "mean": sum(values) / len(values),
            "std": spread(values) or 0.0,
            "min": min(values),
            "max": max(values),
        }
        decimals = column_decimals(stats.values())  # one format for the four
        shown = ", ".join(f"{k} {fmt_fixed(v, decimals)}" for k, v in stats.items())
        rows.append(("episodes", f"{len(values)} {s.primary_metric}: {shown}"))
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
            metrics.add_row(Text(name + mark), fmt_significant(measured))
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
    number_w = len(f"#{len(c.runs)}")
    run_w = max(len(r.run_id) for r in c.runs)
    task_w = max(len("task"), *(len(r.task_id) for r in c.runs))
    label_w = max(len("label"), *(len(r.label) for r in c.runs))
    room = _room(number_w, run_w, task_w)
    if label_w > room:  # the label and the task id share what is left
        task_w = max(len("task"), min(task_w, _room(number_w, run_w) // 2))
        room = _room(number_w, run_w, task_w)
    label_w = max(len("label"), min(label_w, room))
    legend.add_column("#", no_wrap=True)
    legend.add_column("run", no_wrap=True, min_width=run_w)
    legend.add_column("label", no_wrap=True, width=label_w)
    legend.add_column("task", no_wrap=True, width=task_w)
    for i, r in enumerate(c.runs, 1):
        legend.add_row(
            f"#{i}", Text(r.run_id), _broken(r.label, label_w), _broken(r.task_id, task_w)
        )
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
        if row.metric == "score" and any(r.model_tokens is not None for r in c.runs):
            table.add_row("model tokens", *fmt_tokens([r.model_tokens for r in c.runs]))
            table.add_row("model calls", *fmt_column([r.model_calls for r in c.runs]))
    spread_decimals = column_decimals(c.spreads, SIGNIFICANT)  # one format for the row
    table.add_row(
        "episode std",
        *[
            "-" if sd is None else f"{fmt_fixed(sd, spread_decimals)} (n={len(r.episode_values)})"
            for sd, r in zip(c.spreads, c.runs, strict=True)
        ],
    )
    out.print(table)
    for note in c.notes:
        _say(f"note: {note}")


def print_unverified(runs: list[RunSummary]) -> None:
    """The unverified runs, apart from the ranking: what they claim, never a rank."""
    if not runs:
        return
    table = _table(
        "UNVERIFIED, not ranked: result.json disagrees with the signed events",
        caption="'ale-robotics runs show RUN' says what disagrees",
    )
    run_w = max(len(s.run_id) for s in runs)
    claims_w = max(len("claims"), *(len(_score(s)) for s in runs))
    task_w = max(len("task"), *(len(s.task_id) for s in runs))
    label_w = max(len("label"), *(len(s.label) for s in runs))
    room = _room(run_w, claims_w, task_w)
    if label_w > room:
        task_w = max(len("task"), min(task_w, _room(run_w, claims_w) // 2))
        room = _room(run_w, claims_w, task_w)
    label_w = max(len("label"), min(label_w, room))
    table.add_column("task", no_wrap=True, width=task_w)
    table.add_column("label", no_wrap=True, width=label_w)
    table.add_column("claims", justify="right", no_wrap=True)
    table.add_column("run", no_wrap=True, min_width=run_w)
    for s in runs:
        table.add_row(
            _broken(s.task_id, task_w), _broken(s.label, label_w), _score(s), Text(s.run_id)
        )
    out.print(table)


def print_leaderboard(rows: list[LeaderRow], left_out: list[RunSummary], root: Path) -> None:
    """``leaderboard``'s tables: one per task, best run of each label first, and how many
    runs were left out of the ranking."""
    if not rows:
        _say(
            f"nothing to rank under {root}: a run ranks only when the evaluator measured "
            "what it was given under the task's full protocol, and it has a score (a full "
            "run, without --episodes, that submitted or played its eval session)"
        )
    groups: dict[str, list[LeaderRow]] = {}
    for r in rows:
        groups.setdefault(r.board, []).append(r)  # a task, or a task on one engine
    widest = max((len(r.run_id) for r in rows), default=3)
    for task_id, group in groups.items():
        table = _table(task_id)
        ranks = [str(r.rank) for r in group]
        scores = [f"{r.score:.{SCORE_DECIMALS}f}" for r in group]
        counts = [str(r.runs) for r in group]
        dates = [_when(r.started_at, date_only=True) for r in group]
        cost = cost_cells(group)  # the best run's model tokens and calls, where counted
        room = _room(
            max(1, *map(len, ranks)),
            max(len("score"), *map(len, scores)),
            *cost_width(cost),
            max(len("runs"), *map(len, counts)),
            widest,
            max(len("started"), *map(len, dates)),
        )
        label_w = max(len("label"), min(room, max(len(r.label) for r in group)))
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("label", no_wrap=True, width=label_w)
        table.add_column("score", justify="right", no_wrap=True)
        if cost:
            table.add_column(Text(COST_HEADER), width=cost_width(cost)[0], no_wrap=True)
        table.add_column("runs", justify="right", no_wrap=True)
        table.add_column("best run", no_wrap=True, min_width=widest)
        table.add_column("started", no_wrap=True)
        for i, (r, rank, score, count, date) in enumerate(
            zip(group, ranks, scores, counts, dates, strict=True)
        ):
            table.add_row(
                rank,
                _broken(r.label, label_w),
                score,
                *cost[i : i + 1],
                count,
                Text(r.run_id),
                date,
            )
        out.print(table)
    if any(r.model_tokens is not None for r in rows):
        _say(cost_note("the best run"))
    if left_out:
        n = len(left_out)
        _say(
            f"{n} run{'s' if n != 1 else ''} not ranked (unverified, smoke, no result, "
            "interrupted, failed, unofficial or unscored): 'ale-robotics runs list' shows "
            "them, 'leaderboard --json' says why"
        )
