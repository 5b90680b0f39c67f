"""``ale-robotics runs list|show|compare`` and ``ale-robotics leaderboard``: runs compared.

This module parses arguments, draws tables and sets exit codes; what a run is, which
runs rank and how two runs compare is :mod:`ale_robotics.runs`, which the HTML report
reads too. Tables fit 80 columns and never cut a run id (what a user copies into the
next command); ``--json`` prints one document instead.

Every run is checked against its signed events (:mod:`ale_robotics.runs.verify`): one
whose ``result.json`` they contradict is shown as UNVERIFIED and never ranked.
``--public-key`` (repeatable) names the evaluator keys to trust; without it each
trajectory's own published key is taken (the signed events are consistent, but
nothing says who signed them).

Exit codes: 0 ok (an empty list or leaderboard too), 2 a usage error (no such runs
directory, no such run, a run id prefix naming several runs, fewer than two runs to
compare).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pydantic
import typer
from rich import box
from rich.table import Table
from rich.text import Text

from ale_robotics.cli.app import AleTyper, app, console, emit_json, friendly, out
from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.runs import (
    Comparison,
    LeaderRow,
    RunIndex,
    RunSummary,
    compare,
    leaderboard,
    load_summary,
    spread,
)
from ale_robotics.runs.compare import SCORE_DECIMALS, diff_text, fmt_fixed
from ale_robotics.runs.verify import pin
from ale_robotics.scoring.report import fmt_number

if TYPE_CHECKING:
    from ale_robotics.evalset.layout import SetPlace

__all__ = ["runs_app"]

JSON_SCHEMA_VERSION = 1
"""``schema_version`` of every document these commands print with ``--json``."""

runs_app = AleTyper(
    help="List, show and compare runs (the run directories 'ale-robotics run' writes).",
    no_args_is_help=True,
)
app.add_typer(runs_app, name="runs")

RootArg = Annotated[
    Path,
    typer.Argument(
        metavar="RUNS_ROOT",
        help="The directory holding the run directories (default: runs, where "
        "'ale-robotics run' puts them).",
        show_default=False,
    ),
]
RootOpt = Annotated[
    Path,
    typer.Option(
        "--root",
        metavar="RUNS_ROOT",
        help="Where run ids are looked up (default: runs).",
        show_default=False,
    ),
]
TaskOpt = Annotated[
    str | None, typer.Option("--task", metavar="ID", help="Only the runs of this task.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead.")]
KeysOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--public-key",
        metavar="KEY",
        help="An evaluator public key to trust (64 hex digits, or a file with the hex or a "
        "PEM key, e.g. STATE_DIR/signing_key.pem); repeat for several. A run signed with "
        "another key is unverified. Default: each trajectory's own key.",
        show_default=False,
    ),
]
RunArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN",
        help="A run id (or a prefix naming one run), or a run directory.",
    ),
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


def _keys(values: list[str] | None) -> frozenset[str]:
    """The --public-key values as raw keys (hex)."""
    from ale_robotics.trajectory import KeyFileError, load_public_key

    keys = set()
    for value in values or []:
        try:
            keys.add(load_public_key(value))
        except KeyFileError as exc:
            raise InvalidArgumentError(f"--public-key: {exc.message}") from None
    return frozenset(keys)


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


def _warn(index: RunIndex) -> None:
    for line in index.warnings:
        console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    for problem in index.problems():
        console.print(
            f"warning: skipped {problem.path}: {problem.reason}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def _check_task(task_id: str | None, found: bool) -> None:
    """An unknown task id matching no run: the registry's error (with suggestions)."""
    if task_id is None or found:
        return
    from ale_robotics.tasks import default_registry

    default_registry().get(task_id)  # raises TaskNotFoundError for an unregistered id


def _by_task(runs: list[RunSummary]) -> dict[str, list[RunSummary]]:
    groups: dict[str, list[RunSummary]] = {}
    for s in runs:
        groups.setdefault(s.task_id, []).append(s)
    return dict(sorted(groups.items()))


# ------------------------------------------------------------------ runs list --


@runs_app.command("list")
@friendly
def runs_list(
    root: RootArg = Path("runs"),
    task: TaskOpt = None,
    public_key: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every run under RUNS_ROOT, oldest first, grouped by task: its id, label, start
    (UTC), score and kind (official, smoke N/M, unofficial, interrupted, failed, or
    UNVERIFIED: its result.json disagrees with its signed events).

    The index RUNS_ROOT/index.sqlite3 is brought up to date first (rebuilt if deleted
    or stale). With --json, one document: {"schema_version", "root", "runs": a list
    of run summaries {"run_id", "run_dir", "task_id", "label", "state", "started_at",
    "ended_at", "official", "smoke_episodes", "score", "status", "primary_metric",
    "primary_value", "episode_values", "ranked", "not_ranked_because", "verified",
    "verification": {"verified", "problems", "checks", "evaluator_key", "key_pinned"},
    ...}, "problems": [{"path", "reason"}]}.
    Exit codes: 0 ok (no runs too), 2 a usage error (no such RUNS_ROOT).
    """
    with RunIndex(root, _keys(public_key)) as index:
        runs = index.runs(task)
        _check_task(task, bool(runs))
        if as_json:
            emit_json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "root": str(index.root),
                    "runs": [s.model_dump(mode="json") for s in runs],
                    "problems": [
                        {"path": str(p.path), "reason": p.reason} for p in index.problems()
                    ],
                }
            )
            return
        _warn(index)
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


# ------------------------------------------------------------------ runs show --


def _resolve(
    ref: str, root: Path, index: RunIndex | None, keys: frozenset[str] = frozenset()
) -> RunSummary:
    """The run ``ref`` names: a run directory, else a run id under ``root``."""
    candidate = Path(ref)
    if (candidate / "result.json").is_file():
        try:
            summary = load_summary(candidate.absolute())
            if summary.verification is not None:
                summary = summary.model_copy(
                    update={"verification": pin(summary.verification, keys)}
                )
            return summary
        except OSError as exc:
            raise InvalidArgumentError(
                f"{candidate / 'result.json'} cannot be read: {exc.strerror or exc}"
            ) from None
        except (ValueError, pydantic.ValidationError) as exc:
            raise InvalidArgumentError(
                f"{candidate / 'result.json'} is not a run report ({type(exc).__name__}); "
                "pass a run directory written by 'ale-robotics run'"
            ) from None
    if candidate.is_dir():
        raise NotFoundError(
            f"{ref} has no result.json: the run is still going, or this is not a run "
            "directory (RUNS_ROOT holds them: 'ale-robotics runs list')"
        )
    if index is None:
        if not root.exists():
            raise NotFoundError(
                f"no run directory {ref!r} and no runs directory {str(root)!r} to look the "
                "run id up in: pass --root RUNS_ROOT, or the run's directory"
            )
        index = RunIndex(root, keys)
    return index.find(ref)


def _index_for(root: Path, keys: frozenset[str]) -> RunIndex | None:
    return RunIndex(root, keys) if root.is_dir() else None


@runs_app.command("show")
@friendly
def runs_show(
    run: RunArg,
    root: RootOpt = Path("runs"),
    public_key: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One run: label, kind, whether its result.json agrees with its signed events (and
    what does not), its eval set and repetition, score line, times, per-episode spread,
    submission digest, versions, agent command and every metric.

    With --json, one document: {"schema_version", "run": the run's summary (as in
    'runs list --json'), "result": the path of its result.json (everything else),
    "eval_set": {"name", "repetition"} or null}.
    Exit codes: 0 ok, 2 a usage error (no such run).
    """
    keys = _keys(public_key)
    index = _index_for(root, keys)
    try:
        s = _resolve(run, root, index, keys)
    finally:
        if index is not None:
            index.close()
    place = _set_place(s, root)
    if as_json:
        emit_json(
            {
                "schema_version": JSON_SCHEMA_VERSION,
                "run": s.model_dump(mode="json"),
                "result": str(s.run_dir / "result.json"),
                "eval_set": None
                if place is None
                else {"name": place.set_name, "repetition": place.rep},
            }
        )
        return
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
    rows += [("agent", s.agent_cmd), ("dir", str(s.run_dir))]
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


def _set_place(s: RunSummary, root: Path) -> SetPlace | None:
    """The eval set and repetition of ``s``, when it sits in a set's layout under ``root``
    (or under the directory three levels above it, for a run given by its directory)."""
    from ale_robotics.evalset.layout import set_place

    for base in (root.absolute(), *s.run_dir.parents[3:4]):
        try:
            relative = s.run_dir.relative_to(base)
        except ValueError:
            continue
        found = set_place(relative.as_posix(), s.task_id, s.label)
        if found is not None:
            return found
    return None


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


# --------------------------------------------------------------- runs compare --


def _print_comparison(c: Comparison) -> None:
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
        "≈ within the episodes' spread (|Δ| <= the larger per-episode std of the primary "
        "metric), ≠ beyond it; --json for every digit"
    )
    table.add_column("metric", overflow="fold")
    for i in range(len(c.runs)):
        table.add_column(f"#{i + 1}", justify="right", overflow="fold")
    table.add_row("kind", *[_kind(r) for r in c.runs])
    for row in c.rows:
        cells = []
        for i in range(len(c.runs)):
            text = fmt_fixed(row.values[i], row.decimals)
            extra = diff_text(row.diffs[i], row.decimals, row.within_spread[i])
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


@runs_app.command("compare")
@friendly
def runs_compare(
    runs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN",
            help="Two or more runs (run ids, prefixes naming one run, or run directories); "
            "the first is the one the others are compared with.",
        ),
    ],
    root: RootOpt = Path("runs"),
    public_key: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Runs side by side: score and every metric, each run's difference to the first,
    and whether a difference of the primary metric is within the episodes' spread
    (|difference| <= the larger per-episode standard deviation of the two runs).

    Scores are shown to 3 decimals, other metrics at the precision their values and the
    episodes' standard error support; a difference smaller than the shown precision
    reads '0.000 (same)'. An unverified run is marked UNVERIFIED, with a note.

    With --json, one document: {"schema_version", "runs": the run summaries,
    "spreads": each run's std (or null), "rows": [{"metric", "primary", "values", "diffs",
    "within_spread", "decimals", "same"}], "notes": [...]}: values and diffs whole.
    Exit codes: 0 ok, 2 a usage error (fewer than two runs, no such run).
    """
    if len(runs) < 2:
        raise InvalidArgumentError(
            "give at least two runs to compare (run ids or run directories; "
            "'ale-robotics runs list' shows them)"
        )
    keys = _keys(public_key)
    index = _index_for(root, keys)
    try:
        summaries = [_resolve(ref, root, index, keys) for ref in runs]
    finally:
        if index is not None:
            index.close()
    comparison = compare(summaries)
    if as_json:
        doc: dict[str, Any] = comparison.model_dump(mode="json")
        emit_json(doc)
        return
    _print_comparison(comparison)


# ---------------------------------------------------------------- leaderboard --


@app.command("leaderboard")
@friendly
def leaderboard_cmd(
    root: RootArg = Path("runs"),
    task: TaskOpt = None,
    public_key: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The best official run of each label on each task, ranked by score (ties: the
    earlier run first), with how many ranked runs each label has.

    Only runs whose result.json agrees with their signed events rank: an unverified
    run is listed apart, unranked, with the score it claims. Smoke runs (--episodes),
    interrupted and failed runs, unofficial and unscored ones never rank ('runs list'
    shows them all). With --json, one document: {"schema_version", "root", "rows":
    [{"rank", "task_id", "label", "score", "run_id", "run_dir", "started_at", "runs",
    "primary_metric", "primary_value"}], "unverified": [{"run_id", "task_id", "label",
    "claimed_score", "problems"}], "not_ranked": [{"run_id", "task_id", "label",
    "reason"}]} (not_ranked holds the unverified runs too).
    Exit codes: 0 ok (nothing to rank too), 2 a usage error (no such RUNS_ROOT).
    """
    with RunIndex(root, _keys(public_key)) as index:
        runs = index.runs(task)
        _check_task(task, bool(runs))
        rows = leaderboard(runs, task)
        left_out = [s for s in runs if not s.ranked]
        unverified = [s for s in left_out if s.kind == "unverified"]
        if as_json:
            emit_json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "root": str(index.root),
                    "rows": [r.model_dump(mode="json") for r in rows],
                    "unverified": [
                        {
                            "run_id": s.run_id,
                            "task_id": s.task_id,
                            "label": s.label,
                            "claimed_score": s.score,
                            "problems": s.verification.problems if s.verification else [],
                        }
                        for s in unverified
                    ],
                    "not_ranked": [
                        {
                            "run_id": s.run_id,
                            "task_id": s.task_id,
                            "label": s.label,
                            "reason": s.not_ranked_because,
                        }
                        for s in left_out
                    ],
                }
            )
            return
        _warn(index)
        _print_leaderboard(rows, left_out, index.root)
        _print_unverified(unverified)


def _print_unverified(runs: list[RunSummary]) -> None:
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


def _print_leaderboard(rows: list[LeaderRow], left_out: list[RunSummary], root: Path) -> None:
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
