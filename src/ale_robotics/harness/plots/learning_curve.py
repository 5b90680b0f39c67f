"""``learning_curve.png`` (tasks with checkpoints): the evaluator-measured learning
curve, each committed checkpoint's mean return over its hidden-seed episodes
(with their std) at the evaluator's practice-step count, and the final
evaluation at the run's total, against the paper's published mean curve and its
std band over seeds (:mod:`ale_robotics.tasks.paper_curves`). A run far shorter
than the paper's budget gets a second panel zoomed on its own steps, where the
paper's early curve is comparable.

:func:`curve_plot` computes what is drawn, :func:`curve_figure` draws it,
:func:`plot_learning_curve` writes the PNG, as :mod:`.episodes` splits ``episodes.png``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.harness.plots.canvas import COLOR, builtin_defaults, task_for
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks.paper_curves import PaperCurve, paper_curve
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.container import Container
    from matplotlib.figure import Figure

__all__ = [
    "CurvePlot",
    "curve_figure",
    "curve_plot",
    "plot_learning_curve",
    "wants_learning_curve",
]

_ZOOM_BELOW = 0.2
"""A run whose last checkpoint is below this fraction of the drawn step range gets a zoom."""


@dataclass(frozen=True)
class CurvePlot:
    """What ``learning_curve.png`` shows: the evaluator's points and the paper's curve."""

    title: str
    notes: tuple[str, ...]
    steps: tuple[int, ...]
    """Each checkpoint's practice steps, as the evaluator counted them."""
    mean_return: tuple[float, ...]
    std_return: tuple[float, ...]
    """Std over the checkpoint's hidden-seed episodes (the error bars)."""
    episodes: int | None
    """Hidden-seed episodes per checkpoint (all points have the same count), if any."""
    final_steps: int | None
    """The run's practice steps when the result was built: where the final evaluation sits."""
    final_return: float | None
    """The final evaluation's mean return (the scored metric)."""
    final_episodes: int
    budget_steps: int | None
    """The training budget in practice steps (a vertical line), when there is one."""
    paper: PaperCurve | None
    smoke: str | None

    @property
    def x_max(self) -> float:
        """The right end of the full panel: the budget, the paper's range or our last step."""
        candidates = [float(s) for s in self.steps]
        if self.final_steps is not None:
            candidates.append(float(self.final_steps))
        if self.budget_steps is not None:
            candidates.append(float(self.budget_steps))
        if self.paper is not None:
            candidates.append(float(self.paper.steps[-1]))
        return max(candidates, default=1.0) or 1.0

    @property
    def zoom_to(self) -> float | None:
        """The right end of a zoomed panel, or None when the run fills the full one."""
        ours = max([*self.steps, self.final_steps or 0], default=0)
        if ours <= 0 or ours >= _ZOOM_BELOW * self.x_max:
            return None
        if self.paper is not None and len(self.paper.steps) > 1:  # at least 2 paper points
            return max(ours * 1.15, float(self.paper.steps[min(2, len(self.paper.steps) - 1)]))
        return ours * 1.15


def wants_learning_curve(result: EvalResult, task: TaskSpec | None = None) -> bool:
    """Whether a run gets ``learning_curve.png``: it has a measured curve, or its task
    takes checkpoints (a run that committed none shows it, against the paper's curve)."""
    if result.learning_curve:
        return True
    task = task if task is not None else task_for(result)
    return task is not None and task.training is not None and task.training.checkpoints is not None


def curve_plot(
    result: EvalResult, task: TaskSpec | None = None, paper: PaperCurve | None = None
) -> CurvePlot:
    """The data of ``learning_curve.png``; ``paper`` defaults to the task's published curve."""
    task = task if task is not None else task_for(result)
    if paper is None:
        paper = paper_curve(result.task_id)
    points = result.learning_curve
    notes: list[str] = []
    if not points:
        notes.append("no checkpoint was committed: the evaluator measured no learning curve")
    if paper is None:
        notes.append("the paper published no learning curve for this task")
    training = result.training
    final_steps = training.agent_steps if training is not None else None
    budget = training.agent_steps_budget if training is not None else None
    if training is None:
        notes.append("the evaluator counted no practice steps (simulator on the agent's side)")
    final = result.metrics.get("mean_return")
    if final is not None and not math.isfinite(final):
        final = None
    smoke = None
    if result.smoke_run is not None:
        s = result.smoke_run
        smoke = f"smoke run: {s.episodes} of {s.of} episodes, not official"
    counts = {p.episodes for p in points}
    return CurvePlot(
        title=f"{result.task_id}: {result.run_id}",
        notes=tuple(notes),
        steps=tuple(p.practice_steps for p in points),
        mean_return=tuple(p.mean_return for p in points),
        std_return=tuple(p.std_return for p in points),
        episodes=counts.pop() if len(counts) == 1 else None,
        final_steps=final_steps,
        final_return=final,
        final_episodes=len(result.episodes),
        budget_steps=budget,
        paper=paper,
        smoke=smoke,
    )


_OURS = "#dd8452"
_PAPER = "#1f7a1f"


def curve_figure(plot: CurvePlot) -> Figure:
    """``plot`` drawn on an Agg canvas (built-in defaults, no pyplot), the legend below it.

    ``fig.axes[0]`` is the full step range; ``fig.axes[1]``, when the run is short
    next to it (:attr:`CurvePlot.zoom_to`), the same data zoomed on the run's steps.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    with builtin_defaults():
        zoom = plot.zoom_to
        panels = 1 if zoom is None else 2
        fig = Figure(figsize=(8, 1.6 + 3.2 * panels), dpi=110, layout="constrained")
        FigureCanvasAgg(fig)
        axes = list(fig.subplots(panels, 1, squeeze=False)[:, 0])
        handles: list[Artist | Container] = []
        for i, ax in enumerate(axes):
            right = plot.x_max if i == 0 else zoom
            assert right is not None
            drawn = _draw_curve(ax, plot, right)
            if i == 0:
                handles = drawn
            ax.set_xlim(0, right * 1.02)
            ax.xaxis.set_major_formatter(FuncFormatter(_steps_label))
            ax.set_ylabel("mean return\n↑ higher is better", fontsize=9)
            ax.grid(alpha=0.3)
            ax.axhline(0, color="black", lw=0.6)
        axes[-1].set_xlabel("practice steps (counted by the evaluator)", fontsize=9)
        if zoom is not None:
            axes[1].set_title(f"zoom: the run's first {_steps_label(zoom, 0)} steps", fontsize=8.5)
        if plot.smoke is None:
            fig.suptitle(plot.title, fontsize=10)
        else:
            title = f"{plot.title}\n{plot.smoke}"
            fig.suptitle(title, fontsize=10, color=COLOR["failed"], fontweight="bold")
        if plot.notes:
            axes[0].set_title("\n".join(plot.notes), fontsize=8.5, color="#333333")
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=min(len(handles), 2),
            fontsize=8,
            frameon=False,
        )
        return fig


def _draw_curve(ax: Axes, plot: CurvePlot, right: float) -> list[Artist | Container]:
    """The paper's band and mean, the evaluator's checkpoints and final evaluation."""
    handles: list[Artist | Container] = []
    paper = plot.paper
    if paper is not None:
        # The paper's points inside the panel, plus the next one so the line reaches the edge.
        last = next((i for i, s in enumerate(paper.steps) if s >= right), len(paper.steps) - 1)
        xs = paper.steps[: last + 1]
        mean = paper.mean_return[: last + 1]
        std = paper.std_return[: last + 1]
        lo = [m - s for m, s in zip(mean, std, strict=True)]
        hi = [m + s for m, s in zip(mean, std, strict=True)]
        band = ax.fill_between(xs, lo, hi, color=_PAPER, alpha=0.15, lw=0)
        band.set_label(f"paper ±1 std over {paper.seeds} seeds")
        (line,) = ax.plot(xs, mean, color=_PAPER, lw=1.6, ls="--")
        line.set_label(f"paper mean ({paper.label})")
        handles += [line, band]
    if plot.steps:
        what = f"{plot.episodes} hidden-seed episodes" if plot.episodes else "hidden seeds"
        bars = ax.errorbar(
            plot.steps,
            plot.mean_return,
            yerr=plot.std_return,
            color=_OURS,
            marker="o",
            ms=5,
            lw=1.6,
            capsize=3,
            label=f"checkpoints, evaluator-measured (mean ± std over {what})",
        )
        handles.append(bars)
    if plot.final_return is not None and plot.final_steps is not None:
        (star,) = ax.plot(
            [plot.final_steps],
            [plot.final_return],
            ls="none",
            marker="*",
            ms=13,
            color="#c44e52",
            label=f"final evaluation, {plot.final_episodes} hidden-seed episodes: "
            f"{plot.final_return:.1f}",
        )
        handles.append(star)
    if plot.budget_steps is not None and plot.budget_steps <= right * 1.02:
        budget = ax.axvline(plot.budget_steps, color="#555555", lw=1, ls=":")
        budget.set_label(f"training budget {plot.budget_steps:,} steps")
        handles.append(budget)
    return handles


def _steps_label(x: float, _pos: object) -> str:
    """Tick labels: 0, 500, 250k, 1M."""
    if abs(x) >= 1_000_000:
        return f"{x / 1_000_000:g}M"
    if abs(x) >= 1_000:
        return f"{x / 1_000:g}k"
    return f"{x:g}"


def plot_learning_curve(
    result: EvalResult,
    path: Path,
    *,
    task: TaskSpec | None = None,
    paper: PaperCurve | None = None,
) -> None:
    """The evaluator-measured learning curve against the paper's, as a PNG (see the module
    doc); drawn with matplotlib's built-in defaults only, without pyplot, as
    :func:`plot_episodes` is."""
    with builtin_defaults():
        fig = curve_figure(curve_plot(result, task, paper))
        fig.savefig(path)
