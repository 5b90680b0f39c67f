"""The aggregate of an eval set: per-cell and per-agent statistics with intervals.

Scores are the runs' own ``score.score``: already normalized (1.0 = the paper's
value, clamped to the task's cap), which is what makes them comparable across tasks
and what rliable's aggregate metrics assume.

Per (task, agent) cell: the number of scored runs, and the mean and the IQM of their
scores, each with a stratified-bootstrap interval over the repetitions (one task, so
the one stratum is the cell; with fewer than 4 runs the 25% trim removes nothing and
the IQM equals the mean). Per agent, across tasks: the median, IQM, mean and
optimality gap (``1 - mean(min(score, 1))``) of its (runs x tasks) score matrix, with
runs resampled within each task, and its performance profile (the fraction of runs
scoring above each threshold). A matrix needs the same number of runs on every task:
when some runs failed, the first ``k`` scored repetitions of each task are used, ``k``
the smallest count, and a note says so.

Only runs whose ``result.json`` agrees with their signed events count
(:mod:`ale_robotics.runs.verify`): an unverified run is left out of its cell (its
repetition is listed in ``unverified_reps``) and a note says which, so a rewritten
``result.json`` never moves an interval.

Beside the scores, the model's cost (:mod:`.cost`): each cell's tokens per run, each
agent's mean tokens and calls per run with an interval, the score-vs-tokens Pareto
frontier; a run no model gateway counted has no tokens (never 0).

The aggregate is a pure function of the runs' scores, tokens and the bootstrap settings
(no time stamp, no dependence on the order in which runs finished), so a resumed set and
an uninterrupted one over the same runs write the same ``aggregate.json``. It needs
the set's grid (:class:`SetGrid`), which the SPEC gives, and ``aggregate.json``
records for whoever aggregates the runs again later (the HTML report).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.evalset import rliable_api
from ale_robotics.evalset.cost import LabelCost, label_costs, no_cost_reason
from ale_robotics.evalset.interval import Interval
from ale_robotics.evalset.render import all_notes, render_markdown
from ale_robotics.evalset.spec import BootstrapSettings, EvalSetSpec

__all__ = [
    "AGGREGATE_FILE",
    "AgentAggregate",
    "CellAggregate",
    "EvalSetAggregate",
    "Interval",
    "LabelCost",
    "PerformanceProfiles",
    "ProfileCurve",
    "ScoredRun",
    "SetGrid",
    "aggregate",
    "aggregate_grid",
    "all_notes",
    "collect_scored_runs",
    "default_out_dir",
    "render_markdown",
    "write_aggregate",
]

AGGREGATE_FILE = "aggregate.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CellAggregate(_Model):
    """One agent on one task."""

    task_id: str
    label: str
    runs_expected: int = Field(description="Repetitions the SPEC asks for.")
    n: int = Field(description="Scored runs: the sample the statistics are over.")
    reps: list[int] = Field(description="The repetitions (0-based) of those runs.")
    run_ids: list[str] = Field(description="Their run ids, in the same order.")
    scores: list[float] = Field(description="Their scores, in the same order.")
    unscored_reps: list[int] = Field(
        default_factory=list, description="Completed runs without a score (no paper target)."
    )
    missing_reps: list[int] = Field(
        default_factory=list, description="Runs not completed (failed, interrupted, not run)."
    )
    unverified_reps: list[int] = Field(
        default_factory=list,
        description="Completed runs left out because their result.json disagrees with their "
        "signed events (what they claim is not what the evaluator signed).",
    )
    mean: Interval | None = Field(description="Mean score; None without scored runs.")
    iqm: Interval | None = Field(description="Interquartile mean; None without scored runs.")
    tokens: list[int | None] = Field(
        default_factory=list,
        description="The model tokens of those runs, in the same order (None: no model "
        "gateway counted the run's calls).",
    )
    mean_tokens: float | None = Field(
        default=None, description="Mean model tokens per run over those counted; None: none."
    )


class AgentAggregate(_Model):
    """One agent across every task of the set (rliable's aggregate metrics)."""

    label: str
    tasks: list[str]
    runs_per_task: int = Field(description="Runs of each task in the score matrix.")
    median: Interval | None
    iqm: Interval | None
    mean: Interval | None
    optimality_gap: Interval | None = Field(description="1 - mean(min(score, 1)); lower is better.")
    note: str | None = None


class ProfileCurve(_Model):
    """One agent's performance profile: the fraction of its runs above each tau."""

    label: str
    fraction: list[float]
    low: list[float]
    high: list[float]


class PerformanceProfiles(_Model):
    """Score distributions (rliable's performance profiles) on shared thresholds."""

    taus: list[float]
    agents: list[ProfileCurve]


class EvalSetAggregate(_Model):
    """``aggregate.json`` (schema 2: schema 1 with the model's cost, still read): what an
    eval set measured, with intervals, and what its agents spent on their model."""

    schema_version: Literal[1, 2] = 2
    set_name: str
    tasks: list[str]
    labels: list[str]
    repetitions: int
    smoke_episodes: int | None = Field(
        description="Episodes of each smoke run; None when every run was the full protocol."
    )
    runs_expected: int
    runs_scored: int
    bootstrap: BootstrapSettings
    method: str = Field(description="How the intervals were computed.")
    cells: list[CellAggregate]
    agents: list[AgentAggregate]
    profiles: PerformanceProfiles | None
    cost: list[LabelCost] = Field(
        default_factory=list,
        description="Per agent: mean model tokens and calls per run beside its mean score, "
        "and whether it is on the score-vs-tokens Pareto frontier (:mod:`.cost`).",
    )
    no_cost_plot: str | None = Field(
        default=None, description="Why there is no score-vs-tokens plot; None: there is one."
    )
    notes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class ScoredRun:
    """What the aggregate needs of one completed run."""

    task_id: str
    label: str
    rep: int
    run_id: str
    score: float | None
    verified: bool = True
    """False when its result.json disagrees with its signed events: left out."""
    tokens: int | None = None
    """Its model tokens (input + output); None: no model gateway counted its calls."""
    calls: int | None = None


@dataclass(frozen=True)
class SetGrid:
    """What an aggregate is over: the set's tasks, agents (labels) and repetitions, the
    smoke setting and the bootstrap settings (the SPEC's, or ``aggregate.json``'s)."""

    tasks: list[str]
    labels: list[str]
    repetitions: int
    episodes: int | None
    bootstrap: BootstrapSettings
    seeded: tuple[str, ...] | None = None
    """The labels whose agents declared that they train with ``ALE_SEED`` (``uses_seed``);
    None: not known (a grid read back from ``aggregate.json``, whose notes say it)."""

    @classmethod
    def of(cls, spec: EvalSetSpec) -> SetGrid:
        return cls(
            tasks=list(spec.tasks),
            labels=[a.label for a in spec.agents],
            repetitions=spec.repetitions,
            episodes=spec.episodes,
            bootstrap=spec.bootstrap,
            seeded=tuple(a.label for a in spec.agents if a.uses_seed),
        )

    @classmethod
    def recorded(cls, agg: EvalSetAggregate) -> SetGrid:
        """The grid an ``aggregate.json`` was computed over."""
        return cls(
            tasks=list(agg.tasks),
            labels=list(agg.labels),
            repetitions=agg.repetitions,
            episodes=agg.smoke_episodes,
            bootstrap=agg.bootstrap,
        )


def _interval(points: rliable_api.FloatArray, cis: rliable_api.FloatArray, i: int) -> Interval:
    return Interval(value=float(points[i]), low=float(cis[0, i]), high=float(cis[1, i]))


def _cell(task: str, label: str, spec: SetGrid, runs: Sequence[ScoredRun]) -> CellAggregate:
    mine = sorted((r for r in runs if r.task_id == task and r.label == label), key=lambda r: r.rep)
    scored = [r for r in mine if r.score is not None and r.verified]
    done = {r.rep for r in mine}
    mean = iqm = None
    if scored:
        b = spec.bootstrap
        matrix = np.array([[r.score] for r in scored], dtype=np.float64)
        points, cis = rliable_api.interval_estimate(
            matrix, ("mean", "iqm"), reps=b.reps, confidence=b.confidence, seed=b.seed
        )
        mean, iqm = _interval(points, cis, 0), _interval(points, cis, 1)
    counted = [r.tokens for r in scored if r.tokens is not None]  # by a model gateway
    return CellAggregate(
        task_id=task,
        label=label,
        runs_expected=spec.repetitions,
        n=len(scored),
        reps=[r.rep for r in scored],
        run_ids=[r.run_id for r in scored],
        scores=[float(r.score) for r in scored if r.score is not None],
        unscored_reps=[r.rep for r in mine if r.score is None and r.verified],
        missing_reps=[k for k in range(spec.repetitions) if k not in done],
        unverified_reps=[r.rep for r in mine if not r.verified],
        mean=mean,
        iqm=iqm,
        tokens=[r.tokens for r in scored],
        mean_tokens=sum(counted) / len(counted) if counted else None,
    )


def _agent_matrix(
    label: str, cells: Sequence[CellAggregate]
) -> tuple[np.ndarray | None, int, str | None]:
    """The agent's (runs x tasks) matrix, its run count per task, and a note."""
    mine = [c for c in cells if c.label == label]
    empty = [c.task_id for c in mine if c.n == 0]
    if empty:
        return None, 0, f"no scored run on {', '.join(empty)}: no aggregate across tasks"
    k = min(c.n for c in mine)
    note = None
    if any(c.n != k for c in mine):
        note = (
            f"runs per task differ ({', '.join(f'{c.task_id}: {c.n}' for c in mine)}); "
            f"the matrix uses the first {k} scored repetition(s) of each task"
        )
    matrix = np.array([c.scores[:k] for c in mine], dtype=np.float64).T
    return matrix, k, note


def _taus(runs: Iterable[ScoredRun]) -> np.ndarray:
    """Thresholds from 0 to the best score (at least 1.0, the paper), in steps of 0.025."""
    best = max([1.0, *(r.score for r in runs if r.score is not None and r.verified)])
    top = math.ceil(best * 4) / 4
    return np.linspace(0.0, top, round(top / 0.025) + 1)


def aggregate(spec: EvalSetSpec, set_name: str, runs: Sequence[ScoredRun]) -> EvalSetAggregate:
    """The aggregate of ``runs`` (the completed runs of the set, in any order)."""
    return aggregate_grid(SetGrid.of(spec), set_name, runs)


def aggregate_grid(spec: SetGrid, set_name: str, runs: Sequence[ScoredRun]) -> EvalSetAggregate:
    """The aggregate of ``runs`` over the grid ``spec`` (:func:`aggregate` from a SPEC)."""
    b = spec.bootstrap
    labels = list(spec.labels)
    cells = [_cell(task, label, spec, runs) for task in spec.tasks for label in labels]
    agents: list[AgentAggregate] = []
    profile_curves: list[ProfileCurve] = []
    taus = _taus(runs)
    for label in labels:
        agent, curve = _agent(label, spec, cells, taus)
        agents.append(agent)
        if curve is not None:
            profile_curves.append(curve)
    scored = sum(c.n for c in cells)
    cost = _costs(spec, cells, runs, agents)
    return EvalSetAggregate(
        set_name=set_name,
        tasks=list(spec.tasks),
        labels=labels,
        repetitions=spec.repetitions,
        smoke_episodes=spec.episodes,
        runs_expected=len(cells) * spec.repetitions,
        runs_scored=scored,
        bootstrap=b,
        method=(
            f"rliable {_rliable_version()} stratified bootstrap over repetitions within "
            f"each task, {b.reps} replications ({b.profile_reps} for profiles), "
            f"percentile {b.confidence:.0%} intervals, seed {b.seed}"
        ),
        cells=cells,
        agents=agents,
        profiles=(
            PerformanceProfiles(taus=[float(t) for t in taus], agents=profile_curves)
            if profile_curves
            else None
        ),
        cost=cost,
        no_cost_plot=no_cost_reason(cost),
        notes=_set_notes(spec, cells),
    )


def _costs(
    spec: SetGrid,
    cells: Sequence[CellAggregate],
    runs: Sequence[ScoredRun],
    agents: Sequence[AgentAggregate],
) -> list[LabelCost]:
    """Each agent's model tokens and calls per run over the runs its cells score."""
    used = {(c.task_id, c.label, rep) for c in cells for rep in c.reps}
    counted: dict[tuple[str, str], list[tuple[int, int]]] = {}
    uncounted: dict[str, int] = {}
    for r in sorted(runs, key=lambda r: r.rep):
        if (r.task_id, r.label, r.rep) not in used:
            continue
        if r.tokens is None:
            uncounted[r.label] = uncounted.get(r.label, 0) + 1
        else:
            counted.setdefault((r.task_id, r.label), []).append((r.tokens, r.calls or 0))
    scores = {a.label: a.mean for a in agents}
    return label_costs(spec.labels, spec.tasks, counted, uncounted, scores, spec.bootstrap)


def _agent(
    label: str, spec: SetGrid, cells: Sequence[CellAggregate], taus: np.ndarray
) -> tuple[AgentAggregate, ProfileCurve | None]:
    """One agent across tasks: its interval estimates and its performance profile over
    ``taus`` (None, and no estimate, when some task has no scored run of it)."""
    b = spec.bootstrap
    matrix, k, note = _agent_matrix(label, cells)
    if matrix is None:
        empty = AgentAggregate(
            label=label,
            tasks=list(spec.tasks),
            runs_per_task=0,
            median=None,
            iqm=None,
            mean=None,
            optimality_gap=None,
            note=note,
        )
        return empty, None
    points, cis = rliable_api.interval_estimate(
        matrix, rliable_api.METRICS, reps=b.reps, confidence=b.confidence, seed=b.seed
    )
    est = {m: _interval(points, cis, i) for i, m in enumerate(rliable_api.METRICS)}
    agent = AgentAggregate(
        label=label,
        tasks=list(spec.tasks),
        runs_per_task=k,
        median=est["median"],
        iqm=est["iqm"],
        mean=est["mean"],
        optimality_gap=est["optimality_gap"],
        note=note,
    )
    profile, pcis = rliable_api.performance_profile(
        matrix, taus, reps=b.profile_reps, confidence=b.confidence, seed=b.seed
    )
    curve = ProfileCurve(
        label=label,
        fraction=[float(v) for v in profile],
        low=[float(v) for v in pcis[0]],
        high=[float(v) for v in pcis[1]],
    )
    return agent, curve


def _set_notes(spec: SetGrid, cells: Sequence[CellAggregate]) -> list[str]:
    """What a reader of the set's numbers must know: smoke runs, runs left out unscored,
    runs left out as unverified."""
    notes: list[str] = []
    if spec.episodes is not None:
        notes.append(
            f"smoke runs: each run evaluated only its task's first {spec.episodes} "
            "episode(s); no run is official"
        )
    if any(c.unscored_reps for c in cells):
        notes.append("some runs completed without a score (no paper target): left out")
    notes += _seed_notes(spec)
    unverified = [f"{c.task_id}/{c.label}/rep{k}" for c in cells for k in c.unverified_reps]
    if unverified:
        notes.append(
            f"{len(unverified)} run(s) left out as UNVERIFIED, their result.json disagreeing "
            f"with their signed events: {', '.join(unverified)} ('ale-robotics runs show "
            "RUN_DIR' says what disagrees)"
        )
    return notes


def _seed_notes(spec: SetGrid) -> list[str]:
    """Whether the repetitions vary training: every run is given its own ``ALE_SEED``, but
    only an agent that uses it trains differently each time."""
    if spec.seeded is None or spec.repetitions < 2:
        return []
    unseeded = [label for label in spec.labels if label not in spec.seeded]
    notes = [
        "each repetition's run was given a training seed of its own (ALE_SEED, in "
        "result.json as agent_seed)"
    ]
    if spec.seeded:
        notes.append(
            f"declared using it (uses_seed), so their intervals include training variance: "
            f"{', '.join(spec.seeded)}"
        )
    if unseeded:
        notes.append(
            f"did not declare using it, so their repetitions may differ only in the hidden "
            f"seeds and their intervals may leave out training variance: {', '.join(unseeded)}"
        )
    return notes


def _rliable_version() -> str:
    try:
        return importlib.metadata.version("rliable")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a broken install
        return "(unknown version)"


def write_aggregate(agg: EvalSetAggregate, out_dir: Path) -> list[Path]:
    """Write ``aggregate.json`` (atomically), ``aggregate.md`` and the plots into
    ``out_dir``; returns the files written. The plots are drawn last and can only fail
    on their own: a figure that cannot be drawn never costs the numbers."""
    from ale_robotics.evalset.plots import draw_plots

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / AGGREGATE_FILE
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(agg.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    md = out_dir / "aggregate.md"
    md.write_text(render_markdown(agg), encoding="utf-8")
    return [target, md, *draw_plots(agg, out_dir)]


def collect_scored_runs(spec: EvalSetSpec, set_name: str, runs_root: Path) -> list[ScoredRun]:
    """The set's completed runs as the aggregate reads them (straight from the run
    directories, so it sees the runs of every invocation, not only the last one), each
    checked against its signed events."""
    from ale_robotics.evalset.layout import inspect_slot, plan_slots
    from ale_robotics.runs.verify import verify_run

    runs: list[ScoredRun] = []
    for slot in plan_slots(spec, runs_root, set_name):
        status = inspect_slot(slot, spec)
        if status.state == "done" and status.report is not None:
            r = status.report
            verified = verify_run(slot.run_dir, r).verified
            usage = r.model_usage
            runs.append(
                ScoredRun(
                    slot.task_id,
                    slot.label,
                    slot.rep,
                    r.run_id,
                    r.score.score,
                    verified,
                    usage.tokens if usage is not None else None,
                    usage.calls if usage is not None else None,
                )
            )
    return runs


def default_out_dir(spec: EvalSetSpec, set_name: str, runs_root: Path) -> Path:
    """Where the aggregate goes: the SPEC's ``out``, else ``RUNS_ROOT/SET/aggregate``."""
    return spec.out if spec.out is not None else runs_root / set_name / "aggregate"
