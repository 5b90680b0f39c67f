"""The eval sets under a runs root, as the report shows them: one page per set.

An eval set (``ale-robotics eval-set``) keeps each run at ``SET/TASK/LABEL/rep<k>/``
under its runs root (:func:`~ale_robotics.evalset.layout.set_place`), so the runs the
index lists say which set and repetition they belong to. A set's page shows what
``eval-set`` printed, recomputed from the runs as they are now (so that a run whose
``result.json`` no longer agrees with its signed events is left out, saying so): per
task the mean and IQM of each agent with their intervals, across tasks each agent's
IQM, optimality gap, mean and median, the performance profiles, and rliable's plots;
and beside the scores what the agents spent on their model: tokens and calls per run,
each agent's mean score against its mean tokens with the Pareto frontier (or why the set
has no such plot: none of its runs had a model gateway).

The grid (tasks, agents, repetitions, smoke setting, bootstrap settings) is the one the
set's ``aggregate.json`` records (``SET/aggregate/``, where ``eval-set`` writes it);
without one (a set interrupted before its first aggregate, or one whose SPEC sent it
elsewhere) it is read off the runs found, with the default bootstrap settings, and
the page says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pydantic

from ale_robotics.evalset.aggregate import (
    AGGREGATE_FILE,
    CellAggregate,
    EvalSetAggregate,
    Interval,
    ScoredRun,
    SetGrid,
    aggregate_grid,
    all_notes,
)
from ale_robotics.evalset.layout import SetPlace, set_place
from ale_robotics.evalset.render import fmt_tokens_interval, tokens_text
from ale_robotics.evalset.spec import BootstrapSettings
from ale_robotics.runs.compare import SCORE_DECIMALS, fmt_fixed
from ale_robotics.runs.summary import RunSummary

__all__ = [
    "PLOT_CAPTIONS",
    "SetMember",
    "SetView",
    "fmt_interval",
    "fmt_mean_tokens",
    "fmt_tokens_ci",
    "group_sets",
    "set_view",
]

PLOT_CAPTIONS: Final = {
    "interval_estimates.png": "Across tasks: each agent's median, IQM, mean and optimality "
    "gap with their bootstrap intervals",
    "per_task_iqm.png": "Per task: each agent's IQM with its interval",
    "performance_profile.png": "Performance profiles: the fraction of runs scoring above "
    "each normalized score",
    "score_vs_tokens.png": "Cost beside score: each agent's mean score against its mean "
    "model tokens per run, with their intervals and the Pareto frontier (filled: on it)",
}
"""The plots of a set page, in the order shown, with their captions."""


@dataclass(frozen=True)
class SetMember:
    """One run of a set: its summary, its place, and its page (a file stem)."""

    summary: RunSummary
    place: SetPlace
    page: str


@dataclass(frozen=True)
class CellRuns:
    """The runs of one (task, agent) cell, by repetition (None: no completed run)."""

    task_id: str
    label: str
    reps: list[SetMember | None]


@dataclass(frozen=True)
class SetView:
    """What a set's page shows."""

    name: str
    page: str
    aggregate: EvalSetAggregate
    cells: list[CellRuns]
    recorded: bool
    """Whether the grid is the one the set's aggregate.json records."""
    members: list[SetMember] = field(default_factory=list)
    images: list[dict[str, str]] = field(default_factory=list)

    @property
    def unverified(self) -> int:
        return sum(len(c.unverified_reps) for c in self.aggregate.cells)

    @property
    def costed(self) -> bool:
        """Some run of the set had its model calls counted: the pages show tokens."""
        return any(c.runs_counted for c in self.aggregate.cost)

    @property
    def frontier(self) -> list[str]:
        """The agents on the score-vs-tokens Pareto frontier, fewest tokens first."""
        placed = [c for c in self.aggregate.cost if c.pareto and c.tokens is not None]
        return [c.label for c in sorted(placed, key=lambda c: c.tokens.value if c.tokens else 0)]

    @property
    def rows(self) -> list[tuple[CellAggregate, CellRuns]]:
        """Each cell's statistics with its runs (both in the grid's order)."""
        return list(zip(self.aggregate.cells, self.cells, strict=True))

    @property
    def notes(self) -> list[str]:
        notes = all_notes(self.aggregate)
        if not self.recorded:
            notes.append(
                f"no {AGGREGATE_FILE} under {self.name}/aggregate (the set was interrupted "
                "before its first aggregate, or its SPEC wrote it elsewhere): the tasks, agents "
                "and repetitions are the ones its runs show, the intervals use the default "
                "bootstrap settings"
            )
        return notes


def group_sets(
    root: Path, runs: Sequence[RunSummary], pages: dict[Path, str]
) -> dict[str, list[SetMember]]:
    """The runs under ``root`` that sit in an eval set's layout, by set name (sorted)."""
    found: dict[str, list[SetMember]] = {}
    for s in runs:
        try:
            relative = s.run_dir.relative_to(root).as_posix()
        except ValueError:
            continue
        place = set_place(relative, s.task_id, s.label)
        if place is not None:
            found.setdefault(place.set_name, []).append(SetMember(s, place, pages[s.run_dir]))
    return dict(sorted(found.items()))


def _recorded(path: Path) -> EvalSetAggregate | None:
    try:
        return EvalSetAggregate.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, pydantic.ValidationError):
        return None


def _inferred(members: Sequence[SetMember]) -> SetGrid:
    tasks = sorted({m.summary.task_id for m in members})
    labels = sorted({m.summary.label for m in members})
    episodes = {m.summary.smoke_episodes for m in members if m.summary.state == "completed"}
    return SetGrid(
        tasks=tasks,
        labels=labels,
        repetitions=max(m.place.rep for m in members) + 1,
        episodes=episodes.pop() if len(episodes) == 1 else None,
        bootstrap=BootstrapSettings(),
    )


def set_view(root: Path, name: str, members: Sequence[SetMember], page: str) -> SetView:
    """The page of the set ``name`` (``members``: its runs found under ``root``)."""
    recorded = _recorded(root / name / "aggregate" / AGGREGATE_FILE)
    grid = SetGrid.recorded(recorded) if recorded is not None else _inferred(members)
    tasks, labels = list(grid.tasks), list(grid.labels)
    for m in members:  # runs of a task or agent the recorded grid does not know
        if m.summary.task_id not in tasks:
            tasks.append(m.summary.task_id)
        if m.summary.label not in labels:
            labels.append(m.summary.label)
    reps = max([grid.repetitions, *(m.place.rep + 1 for m in members)])
    grid = SetGrid(tasks, labels, reps, grid.episodes, grid.bootstrap)
    completed = [m for m in members if m.summary.state == "completed"]
    scored = [
        ScoredRun(
            m.summary.task_id,
            m.summary.label,
            m.place.rep,
            m.summary.run_id,
            m.summary.score,
            m.summary.verified,
            m.summary.model_tokens,
            m.summary.model_calls,
        )
        for m in completed
    ]
    agg = aggregate_grid(grid, name, scored)
    by_slot = {(m.summary.task_id, m.summary.label, m.place.rep): m for m in members}
    cells = [
        CellRuns(task, label, [by_slot.get((task, label, k)) for k in range(grid.repetitions)])
        for task in grid.tasks
        for label in grid.labels
    ]
    return SetView(
        name=name,
        page=page,
        aggregate=agg,
        cells=cells,
        recorded=recorded is not None,
        members=sorted(members, key=lambda m: (m.place.rep, m.summary.task_id, m.summary.label)),
    )


def fmt_interval(iv: Interval | None) -> str:
    """'0.509 [0.412, 0.611]': a point estimate and its interval, to 3 decimals."""
    if iv is None:
        return "—"
    return (
        f"{fmt_fixed(iv.value, SCORE_DECIMALS)} "
        f"[{fmt_fixed(iv.low, SCORE_DECIMALS)}, {fmt_fixed(iv.high, SCORE_DECIMALS)}]"
    )


def fmt_tokens_ci(iv: Interval | None) -> str:
    """'2880 [2640, 3120]': mean model tokens per run and its interval, whole tokens;
    '—' when no model gateway counted the runs (no tokens, which is not 0)."""
    return "—" if iv is None else fmt_tokens_interval(iv)


def fmt_mean_tokens(value: float | None) -> str:
    """A mean of token counts to whole tokens; '—' when nothing counted them."""
    return "—" if value is None else tokens_text(value)
