"""``episodes.png``: the run's evaluation episodes, for a person to look at."""

from __future__ import annotations

from pathlib import Path

from ale_robotics.evaluator.result import EvalResult

__all__ = ["plot_episodes"]


def plot_episodes(result: EvalResult, target: float | None, path: Path) -> None:
    """Per-episode returns against the paper target, as a PNG.

    Drawn with matplotlib's built-in defaults only: a ``matplotlibrc`` in the
    working directory or the user's config (``figure.hooks: sys:exit`` runs code
    when a figure is made through pyplot) is never applied, and the figure is
    built on the Agg canvas directly, without pyplot.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    defaults = {
        k: v
        for k, v in matplotlib.rcParamsDefault.items()
        if k not in ("backend", "backend_fallback", "interactive")
    }
    with matplotlib.rc_context(rc=defaults):
        returns = [e.episode_return for e in result.episodes]
        fig = Figure(figsize=(7, 3.5), dpi=110)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.bar(range(len(returns)), returns, color="#4c72b0", label="episode return")
        if returns:
            mean = sum(returns) / len(returns)
            ax.axhline(mean, color="#dd8452", lw=2, label=f"mean {mean:.1f}")
        if target is not None:
            ax.axhline(target, color="#55a868", lw=2, ls="--", label=f"paper {target:g}")
        ax.set_xlabel("evaluation episode (hidden seed)")
        ax.set_ylabel("return")
        ax.set_title(f"{result.task_id}: {result.run_id}")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
