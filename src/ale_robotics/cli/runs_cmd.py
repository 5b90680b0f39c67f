"""``ale-robotics runs list|show|compare`` and ``ale-robotics leaderboard``: runs compared.

This module parses arguments, finds the runs named, prints ``--json`` documents and sets
exit codes; the tables are :mod:`.runs_tables` (they fit 80 columns and never cut a run
id). What a run is, which runs rank and how two runs compare is
:mod:`ale_robotics.runs`, which the HTML report reads too.

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

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pydantic
import typer

from ale_robotics.cli.app import AleTyper, app, emit_json, friendly
from ale_robotics.cli.runs_tables import (
    print_comparison,
    print_index_warnings,
    print_leaderboard,
    print_run,
    print_run_list,
    print_unverified,
    print_warnings,
)
from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.model.video import VIDEOS_DIR, read_video_index
from ale_robotics.runs import RunIndex, RunSummary, compare, leaderboard, load_summary
from ale_robotics.runs.unfinished import unfinished_run
from ale_robotics.runs.verify import pin

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


def _check_task(task_id: str | None, found: bool) -> None:
    """An unknown task id matching no run: the registry's error (with suggestions)."""
    if task_id is None or found:
        return
    from ale_robotics.tasks import default_registry

    default_registry().get(task_id)  # raises TaskNotFoundError for an unregistered id


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
    (UTC), score, its model's tokens and calls beside it (where the run's model gateway
    counted them; '-' where it had none) and kind (official, smoke N/M, no result,
    unofficial, interrupted, failed, or UNVERIFIED: its result.json disagrees with its
    signed events).

    The index RUNS_ROOT/index.sqlite3 is brought up to date first (rebuilt if deleted
    or stale). With --json, one document: {"schema_version", "root", "runs": a list
    of run summaries {"run_id", "run_dir", "task_id", "label", "state", "started_at",
    "ended_at", "official", "smoke_episodes", "score", "status", "primary_metric",
    "primary_value", "episode_values", "model_tokens", "model_calls" (null: no gateway
    counted them), "ranked", "not_ranked_because", "verified", "verification":
    {"verified", "problems", "checks", "evaluator_key", "key_pinned"}, ...}, "unfinished":
    runs with no result.json [{"run_id", "run_dir", "state": "running" or "lost" (its
    harness died before recording it), "task_id", "label", "started_at"}],
    "problems": [{"path", "reason"}]}.
    Exit codes: 0 ok (no runs too), 2 a usage error (no such RUNS_ROOT).
    """
    with RunIndex(root, _keys(public_key)) as index:
        runs = index.runs(task)
        unfinished = [
            u for u in map(unfinished_run, index.unfinished()) if task is None or u.task_id == task
        ]
        _check_task(task, bool(runs or unfinished))
        if as_json:
            print_warnings(index)  # on stderr: stdout is the document
            emit_json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "root": str(index.root),
                    "runs": [s.model_dump(mode="json") for s in runs],
                    "unfinished": [u.model_dump(mode="json") for u in unfinished],
                    "problems": [
                        {"path": str(p.path), "reason": p.reason} for p in index.problems()
                    ],
                }
            )
            return
        print_run_list(index, runs, task, unfinished)


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
    what does not), its eval set and repetition, score line, its model's calls and
    tokens (or that no gateway counted them), times, per-episode spread, submission
    digest, versions, agent command and every metric.

    With --json, one document: {"schema_version", "run": the run's summary (as in
    'runs list --json'), "result": the path of its result.json (everything else),
    "eval_set": {"name", "repetition"} or null, "videos": its evaluation videos'
    index (videos/videos.json, each file's "path" added) or null}.
    Exit codes: 0 ok, 2 a usage error (no such run).
    """
    keys = _keys(public_key)
    index = _index_for(root, keys)
    try:
        s = _resolve(run, root, index, keys)
    finally:
        if index is not None:
            index.close()
            print_index_warnings(index.warnings)  # an edited index, an unusable key
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
                "videos": _videos_doc(s.run_dir),
            }
        )
        return
    print_run(s, place, read_video_index(s.run_dir))


def _videos_doc(run_dir: Path) -> dict[str, Any] | None:
    """The run's videos' index for ``runs show --json``, each video with its path."""
    index = read_video_index(run_dir)
    if index is None:
        return None
    doc = index.model_dump(mode="json")
    for video in doc["videos"]:
        video["path"] = str(run_dir / VIDEOS_DIR / video["file"])
    return doc


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


# --------------------------------------------------------------- runs compare --


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
    """Runs side by side: score and every metric, each run's difference to the first;
    for the primary metric, the difference's 95% bootstrap interval over the episodes
    (paired by episode when the runs played the same hidden seeds) and 'differs' only
    when it excludes 0.

    Scores are shown to 3 decimals, other metrics at the precision their values and the
    episodes' standard error support; a difference smaller than the shown precision
    reads '0.000 (same)'. An unverified run is marked UNVERIFIED, with a note.

    With --json, one document: {"schema_version", "runs": the run summaries,
    "spreads": each run's std (or null), "rows": [{"metric", "primary", "values", "diffs",
    "intervals", "paired", "differs", "decimals", "same"}], "notes": [...]}: values and
    diffs whole.
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
            print_index_warnings(index.warnings)
    comparison = compare(summaries)
    if as_json:
        doc: dict[str, Any] = comparison.model_dump(mode="json")
        emit_json(doc)
        return
    print_comparison(comparison)


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
    earlier run first), with how many ranked runs each label has and the best run's
    model tokens and calls beside its score (where its model gateway counted them).

    A run ranks only when the evaluator measured what it was given under the task's
    full protocol: smoke runs (--episodes), runs with no result (nothing submitted, a
    rejected submission, no eval session opened: scored 0, never ranked), interrupted
    and failed runs, unofficial and unscored ones never rank ('runs list' shows them
    all). Only runs whose result.json agrees with their signed events rank: an
    unverified run is listed apart, unranked, with the score it claims.

    With --json, one document: {"schema_version", "root", "rows":
    [{"rank", "task_id", "board", "label", "score", "run_id", "run_dir", "started_at",
    "runs", "primary_metric", "primary_value", "model_tokens", "model_calls" (null: no
    gateway counted them)}], "unverified": [{"run_id", "task_id", "label",
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
            print_warnings(index)  # on stderr: stdout is the document
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
        print_warnings(index)
        print_leaderboard(rows, left_out, index.root)
        print_unverified(unverified)
