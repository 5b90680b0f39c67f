"""``ale-robotics report``: the runs under a runs root as a static, self-contained site.

The site is what a person opens to look at results without a terminal: the
leaderboard, the eval sets and every run (``index.html``), one page per run
(``runs/<page>.html``) with its score and how it was reached, whether its
``result.json`` agrees with the evaluator's signed events, the paper target and what
is not comparable about it, the per-episode outcomes and plots, the trajectory as a
timeline with each event's signature status and the verifier's verdict, and the end
of the agent's log; and one page per eval set (``sets/<page>.html``, :mod:`.sets`)
with its per-task and across-task statistics, intervals, plots and runs. Wherever a
score is listed, the model's tokens and calls go beside it (what the run's model
gateway counted; '—' for a run without one, never 0), and a set's page draws its
agents' mean score against their tokens per run with the Pareto frontier.

A run whose ``result.json`` disagrees with its signed events (:mod:`ale_robotics.runs.
verify`) is marked UNVERIFIED wherever it appears, never ranks and is left out of its
set's statistics: its page shows what it claims, and which signed event says otherwise.

Self-contained, because results are looked at where they were made (a lab
machine, a CI artifact, a laptop on a train): the stylesheet and the plots are
copied into the site, nothing is fetched at view time (no CDN, no font, no
script), and each page's Content-Security-Policy forbids loading anything from
elsewhere, so even a mistake in a template cannot make a page reach the network.
The lists come from :class:`~ale_robotics.runs.index.RunIndex` (the same summaries
``runs list`` and ``leaderboard`` print); each run page reads its ``result.json``.

Agents write some of what is shown (their log, submission file names, event
payloads), and labels are free text: the templates autoescape everything and
:mod:`.pages` makes control characters visible.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

import pydantic
from jinja2 import Environment, PackageLoader, StrictUndefined

from ale_robotics import __version__
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report
from ale_robotics.report.pages import (
    breakable,
    episode_table,
    fmt_seconds,
    fmt_time,
    fmt_value,
    learning_curve_table,
    log_tail,
    run_facts,
    visible,
)
from ale_robotics.report.sets import (
    PLOT_CAPTIONS,
    SetView,
    fmt_interval,
    fmt_mean_tokens,
    fmt_tokens_ci,
    group_sets,
    set_view,
)
from ale_robotics.report.timeline import signature_text, timeline
from ale_robotics.report.transcript import transcript_view, usage_view
from ale_robotics.report.videos import video_view
from ale_robotics.runs.index import LeaderRow, RunIndex, RunSummary, leaderboard
from ale_robotics.runs.numbers import fmt_significant

__all__ = ["MARKER", "PLOTS", "SiteBuild", "build_site", "page_name"]

MARKER: Final = ".ale-report"
"""The file that marks a directory as a site this command built (so rebuilding may
replace it; any other non-empty directory is refused, never overwritten)."""
PLOTS: Final = (
    ("episodes.png", "The primary metric per evaluated episode"),
    ("learning_curve.png", "The learning curve measured by the evaluator"),
)
"""The run's plots copied into its page, with their captions."""
MAX_PLOT_BYTES: Final = 32 * 1024 * 1024
_PNG: Final = b"\x89PNG\r\n\x1a\n"
_PAGE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")


@dataclass(frozen=True)
class SiteBuild:
    """What :func:`build_site` wrote."""

    out: Path
    index: Path
    pages: dict[str, Path] = field(default_factory=dict)
    """Run id -> its page."""
    sets: dict[str, Path] = field(default_factory=dict)
    """Eval set name -> its page."""
    problems: list[str] = field(default_factory=list)
    """Run directories whose ``result.json`` could not be read, and why."""
    warnings: list[str] = field(default_factory=list)
    """What did not go as it should but did not stop the build (a read-only runs root)."""


def page_name(run_id: str, taken: set[str]) -> str:
    """The file stem of a run's page: its run id when that is a safe file name
    (``run-20261201T232336Z-5e9acc``), else a digest of it; made unique in ``taken``
    (two run directories may hold one run id, e.g. a copied run)."""
    stem = run_id if _PAGE_NAME.fullmatch(run_id) and run_id not in {".", ".."} else ""
    if not stem:
        stem = "run-" + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    name, n = stem, 2
    while name in taken:
        name, n = f"{stem}-{n}", n + 1
    taken.add(name)
    return name


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("ale_robotics.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=fmt_value,
        seconds=fmt_seconds,
        when=fmt_time,
        visible=visible,
        sig=signature_text,
        ci=fmt_interval,
        tokens_ci=fmt_tokens_ci,
        mean_tokens=fmt_mean_tokens,
        breakable=breakable,
        significant=fmt_significant,
    )
    return env


def _copy_plot(src: Path, dest: Path) -> bool:
    """Copy a run's PNG when it is one: a regular file (never a symlink out of the run
    directory), within :data:`MAX_PLOT_BYTES`, starting with the PNG signature."""
    try:
        if src.is_symlink() or not src.is_file() or src.stat().st_size > MAX_PLOT_BYTES:
            return False
        with src.open("rb") as f:
            if f.read(len(_PNG)) != _PNG:
                return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    except OSError:
        return False
    return True


def _load(run_dir: Path) -> tuple[RunReport | StoppedRunReport | None, str]:
    try:
        return load_run_report(run_dir / "result.json"), ""
    except (OSError, ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        if isinstance(exc, pydantic.ValidationError):
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            return None, f"result.json is not a run report ({where}: {first['msg']})"
        return None, f"result.json cannot be read ({exc})"


def _run_context(summary: RunSummary, page: str, out: Path) -> dict[str, Any]:
    """Everything the run template shows for one run; copies its plots."""
    run_dir = summary.run_dir
    report, problem = _load(run_dir)
    images = []
    for name, caption in PLOTS:
        if _copy_plot(run_dir / name, out / "runs" / page / name):
            images.append({"src": f"{page}/{name}", "name": name, "caption": caption})
    completed = report if isinstance(report, RunReport) else None
    return {
        "summary": summary,
        "report": report,
        "completed": completed,
        "stopped": report if isinstance(report, StoppedRunReport) else None,
        "problem": problem,
        "score": completed.score if completed is not None else None,
        "facts": run_facts(report) if report is not None else [],
        "episodes": episode_table(completed) if completed is not None else None,
        "curve": learning_curve_table(completed) if completed is not None else None,
        "images": images,
        "timeline": timeline(run_dir / "trajectory.jsonl", report),
        "log": log_tail(run_dir / "agent.log"),
        "usage": usage_view(report),
        "transcript": transcript_view(
            run_dir,
            report,
            copy_to=out / "runs" / page / "model_calls.jsonl",
            href=f"{page}/model_calls.jsonl",
        ),
        "log_truncated": completed is not None and completed.agent_log_truncated,
        "videos": video_view(run_dir, page, out),
    }


def _draw_set(view: SetView, stage: Path) -> SetView:
    """Draw the set's plots into its folder of the site; the view with its images."""
    from ale_robotics.evalset.plots import draw_plots

    folder = stage / "sets" / view.page
    folder.mkdir(parents=True, exist_ok=True)
    drawn = {p.name for p in draw_plots(view.aggregate, folder)}
    images = [
        {"src": f"{view.page}/{name}", "name": name, "caption": caption}
        for name, caption in PLOT_CAPTIONS.items()
        if name in drawn
    ]
    return dataclasses.replace(view, images=images)


def _by_task(rows: list[LeaderRow]) -> list[tuple[str, list[LeaderRow]]]:
    groups: dict[str, list[LeaderRow]] = {}
    for row in rows:
        groups.setdefault(row.board, []).append(row)  # a task, or a task on one engine
    return list(groups.items())


@contextlib.contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A new directory beside ``out`` to build into; moved to ``out`` when the build
    succeeds (a failed build leaves ``out`` as it was)."""
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f"--out {out} is a file: pass a directory for the site")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InvalidArgumentError(
            f"--out {out} is not empty and not a site built by 'ale-robotics report': pass a "
            "new or empty directory (a site built before is replaced)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        yield stage
        if out.exists():
            shutil.rmtree(out)
        os.replace(stage, out)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def _copy_assets(stage: Path) -> None:
    """The stylesheet and the icon, into the site (nothing is fetched when it is viewed)."""
    assets = stage / "assets"
    assets.mkdir()
    templates = resources.files("ale_robotics.report") / "templates"
    for asset in ("style.css", "favicon.svg"):
        (assets / asset).write_bytes((templates / asset).read_bytes())


def build_site(runs_root: Path, out: Path) -> SiteBuild:
    """Write the site for the runs under ``runs_root`` into ``out`` (new, empty, or a
    site built before, which is replaced); what was written.

    Raises :class:`~ale_robotics.errors.AleError` subclasses for a missing runs root
    or an ``out`` that is something else.
    """
    out = out.absolute()
    with RunIndex(runs_root) as index:
        runs = index.runs()
        problems = [f"{p.path}: {p.reason}" for p in index.problems()]
        warnings = list(index.warnings)
        root = index.root
    if out == root or out in root.parents or (out / "result.json").exists():
        raise InvalidArgumentError(
            f"--out {out} is or holds the runs (or a run directory): pass a directory of its own"
        )
    rows = leaderboard(runs)
    unverified = [s for s in runs if s.kind == "unverified"]
    env = _environment()
    built_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    common = {"version": __version__, "built_at": built_at, "runs_root": str(root)}
    taken: set[str] = set()
    pages = {s.run_dir: page_name(s.run_id, taken) for s in runs}
    page_of_run = {s.run_id: pages[s.run_dir] for s in reversed(runs)}  # first one wins
    newest_first = sorted(runs, key=lambda s: (s.started_at, s.run_id), reverse=True)
    grouped = group_sets(root, runs, pages)
    set_taken: set[str] = set()
    set_pages = {name: page_name(name, set_taken) for name in grouped}
    place_of_dir = {
        str(m.summary.run_dir): {"set": name, "page": set_pages[name], "rep": m.place.rep}
        for name, members in grouped.items()
        for m in members
    }
    written: dict[str, Path] = {}
    with _staging(out) as stage:
        _copy_assets(stage)
        (stage / "runs").mkdir()
        run_template = env.get_template("run.html.j2")
        for summary in runs:
            page = pages[summary.run_dir]
            context = _run_context(summary, page, stage)
            html = run_template.render(
                root="../", **common, **context, place=place_of_dir.get(str(summary.run_dir))
            )
            (stage / "runs" / f"{page}.html").write_text(html, encoding="utf-8")
            written.setdefault(summary.run_id, out / "runs" / f"{page}.html")
        views = [
            _draw_set(set_view(root, name, members, set_pages[name]), stage)
            for name, members in grouped.items()
        ]
        set_template = env.get_template("set.html.j2")
        for view in views:
            html = set_template.render(root="../", **common, view=view, agg=view.aggregate)
            (stage / "sets" / f"{view.page}.html").write_text(html, encoding="utf-8")
        tasks = sorted({s.task_id for s in runs})
        index_html = env.get_template("index.html.j2").render(
            root="",
            **common,
            leaders=_by_task(rows),
            runs=newest_first,
            page_of_run=page_of_run,
            page_of_dir={str(k): v for k, v in pages.items()},
            tasks=tasks,
            official=sum(1 for s in runs if s.ranked),
            problems=[visible(p) for p in problems],
            unverified=unverified,
            sets=views,
            place_of_dir=place_of_dir,
            any_in_set=any(str(s.run_dir) in place_of_dir for s in runs),
            any_cost=any(s.model_tokens is not None for s in runs),
            leader_cost=any(r.model_tokens is not None for r in rows),
        )
        (stage / "index.html").write_text(index_html, encoding="utf-8")
        (stage / MARKER).write_text(
            json.dumps({"built_by": f"ale-robotics {__version__}", "runs_root": str(root)}) + "\n",
            encoding="utf-8",
        )
    return SiteBuild(
        out=out,
        index=out / "index.html",
        pages=written,
        sets={v.name: out / "sets" / f"{v.page}.html" for v in views},
        problems=problems,
        warnings=warnings,
    )
