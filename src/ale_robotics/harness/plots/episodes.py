"""``episodes.png``: what a run measured per episode, for a person to look at.

One bar per evaluated episode (planning problem, replayed instance) of the
task's *primary metric* in its own unit: the return of a locomotion task, the
cost of Reacher (lower is better), success per instance or problem, planning
time per problem. The y label names the metric and its direction, the
evaluator's measured value and the paper target (when it is on the plotted
metric) are lines in the same unit, and a strip under the bars marks the
episodes the agent abandoned (completed by the evaluator with the null action),
the failed ones (unsolved problems, unsuccessful instances) and, for the
planners, the colliding paths. A smoke run says so in the title, in red.

:func:`episode_plot` computes what is drawn (plain data, tested without pixels),
:func:`episodes_figure` draws it, :func:`plot_episodes` writes the PNG.

Apart from ``learning_curve.png`` (:mod:`.learning_curve`): a figure per module, each
with its data (plain, tested without pixels) next to its drawing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.harness.plots.canvas import COLOR, builtin_defaults, task_for
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import PlanningOutcomes, ReplayOutcomes, episode_outcomes
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks.spec import Direction, MetricSpec, TaskSpec

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "NOT_PER_EPISODE",
    "PER_EPISODE",
    "EpisodePlot",
    "Series",
    "episode_plot",
    "episodes_figure",
    "plot_episodes",
]

PerEpisodeFn = Callable[[EpisodeOutcome], float | None]


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


def _control_ms(o: EpisodeOutcome, field: str) -> float | None:
    value = None if o.control is None else getattr(o.control, field)
    return None if value is None else float(value) / 1000.0


PER_EPISODE: dict[str, tuple[PerEpisodeFn, str, bool]] = {
    "mean_return": (lambda o: o.ret, "return", False),
    "mean_cost": (lambda o: -o.ret, "cost (= −return)", False),
    "mean_episode_length": (lambda o: float(o.length), "length [steps]", False),
    "success_rate": (lambda o: _flag(o.success), "success (1 = yes, 0 = no)", True),
    "collision_rate": (lambda o: _flag(o.collided), "collided (1 = yes, 0 = no)", True),
    "mean_final_distance": (lambda o: o.final_distance, "final distance [{unit}]", False),
    "planning_time": (lambda o: o.planning_time_s, "planning time [{unit}]", False),
    "planning_wall_time": (
        lambda o: o.planning_wall_time_s,
        "wall-clock planning time [{unit}]",
        False,
    ),
    "command_latency_p50_ms": (
        lambda o: _control_ms(o, "latency_p50_us"),
        "median command latency [{unit}]",
        False,
    ),
    "command_latency_p99_ms": (
        lambda o: _control_ms(o, "latency_p99_us"),
        "p99 command latency [{unit}]",
        False,
    ),
    "graph_start_s": (
        lambda o: None if o.control is None else o.control.graph_start_s,
        "graph start [{unit}]",
        False,
    ),
}
"""Metric name -> (one episode's value, its axis label, whether it is 0/1).

:mod:`.evaluator.metrics` computes each metric over all outcomes at once and has
no per-episode function; every metric there but ``std_return`` is the mean of
one value per episode, and this table names that value, so that the bars average
to the evaluator's number (the tests check it against :func:`.metrics.compute`
for every name). A primary metric missing here is drawn as the return, saying so.
"""

NOT_PER_EPISODE = frozenset({"std_return", "held_command_rate"})
"""The metrics that are no mean of one value per episode: the spread of the returns, and the
held commands' share of all control steps (pooled over the episodes, so a long episode
weighs more than a short one)."""


@dataclass(frozen=True)
class Series:
    """A second per-episode quantity drawn under the primary one (a planner's time)."""

    metric: str
    ylabel: str
    values: tuple[float, ...]
    measured: float | None


@dataclass(frozen=True)
class EpisodePlot:
    """What ``episodes.png`` shows, one entry per evaluated episode in result order."""

    title: str
    notes: tuple[str, ...]
    """Lines under the title: abandoned and failed counts, a missing target, fallbacks."""
    metric: str
    """The metric whose per-episode value the bars are (the primary one unless noted)."""
    direction: Direction
    ylabel: str
    xlabel: str
    indices: tuple[int, ...]
    """Each bar's episode index (position in the task's base-seed list)."""
    values: tuple[float, ...]
    binary: bool
    """The values are 0/1 (success, collision): the axis is drawn from 0 to 1."""
    abandoned: tuple[bool, ...]
    failed: tuple[bool, ...]
    """Success known and false: an unsolved problem, an unsuccessful episode."""
    collided: tuple[bool, ...]
    strip: tuple[str, ...]
    """Rows of the marker strip under the bars: 'abandoned', 'failed', 'collided'."""
    measured: float | None
    """The evaluator's value of :attr:`metric` (the mean of :attr:`values`)."""
    target: float | None
    """The paper target, only when it is on :attr:`metric`."""
    smoke: str | None
    """'smoke run: N of M episodes, not official' for a smoke run (drawn in the title)."""
    secondary: Series | None = None
    """Planning tasks whose primary metric is not the time: planning time per problem."""
    floor: float | None = None
    """What doing nothing measured of :attr:`metric` on the same hidden seeds (the
    result's floor, the null action or the policy with zero weights); None without one."""
    floor_policy: str | None = None
    """How the floor did nothing: 'null_action' or 'zero_output'."""


def _outcomes(result: EvalResult) -> list[EpisodeOutcome]:
    """Batch results carry every backend's outcome; interactive ones only their episodes."""
    if result.outcomes is not None:
        return episode_outcomes(result.outcomes)
    return [
        EpisodeOutcome(e.index, e.episode_return, e.length, e.terminated, success=e.success)
        for e in result.episodes
    ]


def _words(result: EvalResult) -> tuple[str, str]:
    """(one, many): 'problem'/'problems', 'instance'/'instances', 'episode'/'episodes'."""
    if isinstance(result.outcomes, PlanningOutcomes):
        return "problem", "problems"
    if isinstance(result.outcomes, ReplayOutcomes):
        return "instance", "instances"
    return "episode", "episodes"


def _primary_values(
    primary: MetricSpec | None, outcomes: list[EpisodeOutcome]
) -> tuple[str, Direction, str, bool, list[float]] | None:
    """(metric, direction, axis label, 0/1, one value per outcome) of the primary metric;
    the return's without a metric, None when the metric has no per-episode value."""
    if primary is None:
        primary = MetricSpec(name="mean_return", direction=Direction.HIGHER_IS_BETTER)
    entry = PER_EPISODE.get(primary.name)
    if entry is None:
        return None
    fn, label, binary = entry
    values = [fn(o) for o in outcomes]
    if any(v is None for v in values):
        return None
    unit = primary.unit or ("s" if primary.name == "planning_time" else "m")
    return (
        primary.name,
        primary.direction,
        label.format(unit=unit),
        binary,
        [float(v) for v in values if v is not None],
    )


def _marks(
    result: EvalResult, outcomes: list[EpisodeOutcome], many: str, notes: list[str]
) -> tuple[list[bool], list[bool], list[bool], list[str]]:
    """Per outcome: abandoned, failed, collided; the strip's rows; counts added to ``notes``.

    A row is drawn for every mark the task can have, even when no episode has it:
    'abandoned' for interactive sessions, 'failed' where success is measured,
    'collided' for planners.
    """
    records = {e.index: e for e in result.episodes}
    abandoned = [o.index in records and records[o.index].abandoned for o in outcomes]
    failed = [o.success is False for o in outcomes]
    collided = [o.collided is True for o in outcomes]
    n = len(outcomes)
    strip: list[str] = []
    if any(abandoned) or any(e.agent_steps is not None for e in result.episodes):
        strip.append("abandoned")
        if any(abandoned):
            notes.append(
                f"{sum(abandoned)} of {n} {many} abandoned by the agent, "
                "completed by the evaluator with the null action"
            )
    if any(o.success is not None for o in outcomes):
        strip.append("failed")
        if any(failed):
            notes.append(f"{sum(failed)} of {n} {many} failed")
    if any(o.collided is not None for o in outcomes):
        strip.append("collided")
    return abandoned, failed, collided, strip


def episode_plot(
    result: EvalResult, target: float | None, task: TaskSpec | None = None
) -> EpisodePlot:
    """The data of ``episodes.png``; ``task`` defaults to the bundled registry's ``task_id``."""
    task = task if task is not None else task_for(result)
    outcomes = _outcomes(result)
    one, many = _words(result)
    notes: list[str] = []
    smoke = None
    if result.smoke_run is not None:
        s = result.smoke_run
        smoke = f"smoke run: {s.episodes} of {s.of} {many}, not official"

    primary = task.primary_metric if task is not None else None
    chosen = _primary_values(primary, outcomes) if primary is not None else None
    if chosen is None:
        why = "no task config" if primary is None else f"{primary.name} has no per-{one} value"
        notes.append(f"{why}: showing the return per {one}")
        chosen = _primary_values(None, outcomes)
        assert chosen is not None
    metric, direction, label, binary, values = chosen
    arrow = "↑ higher" if direction is Direction.HIGHER_IS_BETTER else "↓ lower"

    abandoned, failed, collided, strip = _marks(result, outcomes, many, notes)

    measured = result.metrics.get(metric)
    if measured is None and values:
        measured = math.fsum(values) / len(values)
    on_target = primary is not None and metric == primary.name
    if target is not None and not on_target:
        on = primary.name if primary is not None else "the task's primary metric"
        notes.append(f"paper target {target:g} is on {on}: not drawn")
    elif target is None and primary is not None:
        notes.append("no paper target synced (unscored)")
    secondary = None
    times = [o.planning_time_s for o in outcomes]
    if metric != "planning_time" and times and all(t is not None for t in times):
        secondary = Series(
            metric="planning_time",
            ylabel="planning_time [s]\n↓ lower is better",
            values=tuple(float(t) for t in times if t is not None),
            measured=result.metrics.get("planning_time"),
        )
    floor = result.floor.metrics.get(metric) if result.floor is not None else None
    if floor is not None and not math.isfinite(floor):
        floor = None
    if isinstance(result.outcomes, ReplayOutcomes):
        xlabel = "replayed instance (position in the task's published instances)"
    elif isinstance(result.outcomes, PlanningOutcomes):
        xlabel = "planning problem (hidden seed)"
    else:
        xlabel = "evaluation episode (hidden seed)"
    return EpisodePlot(
        title=f"{result.task_id}: {result.run_id}",
        notes=tuple(notes),
        metric=metric,
        direction=direction,
        ylabel=f"{label} per {one}\n{metric}: {arrow} is better",
        xlabel=xlabel,
        indices=tuple(o.index for o in outcomes),
        values=tuple(values),
        binary=binary,
        abandoned=tuple(abandoned),
        failed=tuple(failed),
        collided=tuple(collided),
        strip=tuple(strip),
        measured=measured,
        target=target if on_target else None,
        smoke=smoke,
        secondary=secondary,
        floor=floor,
        floor_policy=result.floor.policy if floor is not None and result.floor else None,
    )


def _tick_step(n: int, most: int = 20) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... giving at most ``most`` ticks."""
    step, k = 1, 0
    while math.ceil(n / step) > most:
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    return step


def episodes_figure(plot: EpisodePlot) -> Figure:
    """``plot`` drawn on an Agg canvas (built-in defaults, no pyplot), the legend below it.

    Axes, top to bottom: the bars, the planning time (:attr:`EpisodePlot.secondary`)
    and the marker strip, sharing the episode axis; ``fig.axes[0]`` is the bars'.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedFormatter, FixedLocator

    with builtin_defaults():
        n = len(plot.values)
        heights = [3.2]
        if plot.secondary is not None:
            heights.append(1.4)
        if plot.strip:
            heights.append(0.28 * len(plot.strip) + 0.1)
        fig = Figure(figsize=(8, 1.2 + sum(heights)), dpi=110, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(heights), 1, sharex=True, squeeze=False, height_ratios=heights)
        ax, *rest = list(axes[:, 0])
        xs = list(range(n))
        width = 0.8 if n >= 6 else 0.5
        ok = COLOR["success"] if plot.binary else COLOR["ok"]
        colors = [COLOR["failed"] if f else ok for f in plot.failed]
        bars = ax.bar(xs, plot.values, width=width, color=colors, linewidth=0)
        for bar, gone in zip(bars, plot.abandoned, strict=True):
            if gone:
                bar.set_hatch("////")
                bar.set_edgecolor("white")
                bar.set_alpha(0.6)
        handles: list[Artist] = [Patch(color=ok, label=plot.ylabel.split("\n")[0])]
        if any(plot.failed):
            handles.append(Patch(color=COLOR["failed"], label="failed"))
        if any(plot.abandoned):
            handles.append(
                Patch(facecolor=ok, alpha=0.6, hatch="////", edgecolor="white", label="abandoned")
            )
        handles += _reference_lines(ax, plot)
        if plot.binary:
            ax.set_ylim(-0.04, 1.08)
            ax.set_yticks([0, 0.5, 1])
        _style(ax, plot.ylabel)
        ax.set_xlim(-0.7, max(n, 1) - 0.3)
        if plot.secondary is not None:
            tx = rest.pop(0)
            time_colors = [COLOR["failed"] if f else COLOR["ok"] for f in plot.failed]
            tx.bar(xs, plot.secondary.values, width=width, color=time_colors, linewidth=0)
            if plot.secondary.measured is not None:
                tx.axhline(plot.secondary.measured, color="#dd8452", lw=1.5)
            _style(tx, plot.secondary.ylabel)
        if plot.strip:
            _draw_strip(rest.pop(0), plot, n)
        last = fig.axes[-1]
        for a in fig.axes[:-1]:
            a.tick_params(axis="x", labelbottom=False)
        ticks = xs[:: _tick_step(n)]
        last.xaxis.set_major_locator(FixedLocator(ticks))
        last.xaxis.set_major_formatter(FixedFormatter([str(plot.indices[i]) for i in ticks]))
        last.set_xlabel(plot.xlabel, fontsize=9)
        if plot.smoke is None:
            fig.suptitle(plot.title, fontsize=10)
        else:  # the whole figure is not an official result: say so where it is read first
            title = f"{plot.title}\n{plot.smoke}"
            fig.suptitle(title, fontsize=10, color=COLOR["failed"], fontweight="bold")
        if plot.notes:
            ax.set_title("\n".join(plot.notes), fontsize=8.5, color="#333333")
        fig.align_ylabels(fig.axes[: 2 if plot.secondary is not None else 1])
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=min(len(handles), 3),
            fontsize=8,
            frameon=False,
        )
        return fig


def _reference_lines(ax: Axes, plot: EpisodePlot) -> list[Artist]:
    """The measured value, the paper's and the floor across the bars, for the legend."""
    lines: list[Artist] = []
    if plot.measured is not None:
        label = f"measured {plot.metric} {plot.measured:.4g}"
        lines.append(ax.axhline(plot.measured, color="#dd8452", lw=2, label=label))
    if plot.target is not None:
        label = f"paper {plot.metric} {plot.target:g}"
        lines.append(ax.axhline(plot.target, color="#1f7a1f", lw=2, ls="--", label=label))
    if plot.floor is not None:
        how = "zero weights" if plot.floor_policy == "zero_output" else "null action"
        label = f"floor {plot.floor:.4g} (doing nothing: {how})"
        lines.append(ax.axhline(plot.floor, color="#222222", lw=1.8, ls=":", label=label))
    return lines


def _style(ax: Axes, ylabel: str) -> None:
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def _draw_strip(sx: Axes, plot: EpisodePlot, n: int) -> None:
    """One row of markers per status, aligned with the bars above."""
    flags = {"abandoned": plot.abandoned, "failed": plot.failed, "collided": plot.collided}
    style = {
        "abandoned": ("s", COLOR["abandoned"]),
        "failed": ("X", COLOR["failed"]),
        "collided": ("*", "#8c564b"),
    }
    size = 7 if n <= 40 else 4
    labels = []
    for row, name in enumerate(plot.strip):
        marked = [i for i, f in enumerate(flags[name]) if f]
        marker, color = style[name]
        sx.plot(marked, [row] * len(marked), ls="none", marker=marker, color=color, ms=size)
        labels.append(f"{name} ({len(marked)})")
    sx.set_yticks(range(len(plot.strip)), labels, fontsize=8)
    sx.set_ylim(len(plot.strip) - 0.5, -0.5)
    sx.tick_params(axis="y", length=0)
    for row in range(len(plot.strip) - 1):
        sx.axhline(row + 0.5, color="#dddddd", lw=0.6)


def plot_episodes(
    result: EvalResult, target: float | None, path: Path, *, task: TaskSpec | None = None
) -> None:
    """Per-episode values of the task's primary metric against the paper target, as a PNG.

    ``task`` defaults to ``result.task_id`` in the bundled registry (the return is
    drawn for a task it does not hold). Drawn with matplotlib's built-in defaults
    only: a ``matplotlibrc`` in the working directory or the user's config
    (``figure.hooks: sys:exit`` runs code when a figure is made through pyplot) is
    never applied, and the figure is built on the Agg canvas directly, without
    pyplot.
    """
    with builtin_defaults():
        fig = episodes_figure(episode_plot(result, target, task))
        fig.savefig(path)
