"""``learning_curve.png``: the evaluator-measured curve against the paper's published one.

The results are real EvalResults (``data/plot_results.json``) given a learning curve
and a training count, as the evaluator builds them for td3-walker2d-repro-v1; the
tests read what is drawn off the figure itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D

from ale_robotics.harness.plots.learning_curve import (
    curve_figure,
    curve_plot,
    plot_learning_curve,
    wants_learning_curve,
)
from ale_robotics.model.result import CurvePoint, EvalResult, TrainingUsage
from ale_robotics.tasks import default_registry
from ale_robotics.tasks.paper_curves import PAPER_CURVE_FILES, paper_curve

DATA = Path(__file__).parent / "data" / "plot_results.json"
REPRO = "td3-walker2d-repro-v1"


def _result(points: list[tuple[int, float, float]], practiced: int | None) -> EvalResult:
    base = EvalResult.model_validate(json.loads(DATA.read_text())["return"]["eval_result"])
    curve = [
        CurvePoint(
            index=i,
            checkpoint_id=f"ck{i}",
            practice_steps=s,
            policy_sha256=f"{i:064x}",
            episodes=3,
            mean_return=m,
            std_return=sd,
        )
        for i, (s, m, sd) in enumerate(points)
    ]
    training = (
        None
        if practiced is None
        else TrainingUsage(agent_steps=practiced, agent_steps_budget=1_000_000)
    )
    return base.model_copy(
        update={
            "task_id": REPRO,
            "learning_curve": curve,
            "training": training,
            "metrics": {**base.metrics, "mean_return": 280.0},
        }
    )


SHORT = [(1000, -5.0, 3.0), (2000, 150.0, 40.0), (3000, 260.0, 80.0)]
LONG = [(250_000, 2500.0, 300.0), (500_000, 3500.0, 400.0), (1_000_000, 4400.0, 150.0)]


def test_the_paper_curve_is_the_authors_walker2d_mean() -> None:
    paper = paper_curve(REPRO)
    assert paper is not None
    assert paper.seeds == 10 and paper.source.commit.startswith("34770cc")
    assert paper.steps[0] == 0 and paper.steps[-1] == 1_000_000 and len(paper.steps) == 201
    # Table 2's 4565.24 is the mean of the last 10 evaluations of this mean curve.
    assert np.mean(paper.mean_return[-10:]) == pytest.approx(4565.24, abs=0.01)
    assert paper_curve("td3-hopper-v1") is None
    assert set(PAPER_CURVE_FILES) <= {e.spec.id for e in default_registry()}


def test_the_plot_carries_the_evaluators_points_and_the_paper() -> None:
    plot = curve_plot(_result(SHORT, 3000))
    assert plot.steps == (1000, 2000, 3000)
    assert plot.mean_return == (-5.0, 150.0, 260.0)
    assert plot.std_return == (3.0, 40.0, 80.0)
    assert plot.episodes == 3
    assert (plot.final_steps, plot.final_return, plot.budget_steps) == (3000, 280.0, 1_000_000)
    assert plot.paper is not None and plot.notes == ()


def test_a_short_run_gets_a_zoom_and_a_full_one_does_not() -> None:
    short = curve_plot(_result(SHORT, 3000))
    assert short.x_max == 1_000_000
    assert short.zoom_to == 10_000  # two paper evaluations (every 5000 steps) are in view
    assert curve_plot(_result(LONG, 1_000_000)).zoom_to is None


def test_the_figure_draws_both_curves_in_each_panel() -> None:
    fig = curve_figure(curve_plot(_result(SHORT, 3000)))
    fig.canvas.draw()
    assert len(fig.axes) == 2
    full, zoom = fig.axes
    assert zoom.get_xlim()[1] == pytest.approx(10_000 * 1.02)
    for ax in (full, zoom):
        (ours,) = ax.containers  # the checkpoints' error bars
        assert str(ours.get_label()).startswith("checkpoints, evaluator-measured")
        data = ours[0]
        assert isinstance(data, Line2D)
        assert list(data.get_xdata()) == [1000, 2000, 3000]
        assert list(data.get_ydata()) == [-5.0, 150.0, 260.0]
        lines = {str(line.get_label()): line for line in ax.get_lines()}
        paper = next(v for k, v in lines.items() if k.startswith("paper mean"))
        assert list(paper.get_xdata())[:2] == [0, 5000]
        star = next(v for k, v in lines.items() if k.startswith("final evaluation"))
        assert list(star.get_xdata()) == [3000]
        assert list(star.get_ydata()) == [280.0]
        assert any(isinstance(c, PolyCollection) for c in ax.collections), "the paper's band"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "paper ±1 std over 10 seeds" in legend
    assert any(t.startswith("paper mean (sfujim/TD3 @ 34770cc") for t in legend)
    assert "training budget 1,000,000 steps" in legend


def test_a_run_without_checkpoints_says_so() -> None:
    plot = curve_plot(_result([], 0))
    assert plot.steps == ()
    assert plot.notes == ("no checkpoint was committed: the evaluator measured no learning curve",)
    fig = curve_figure(plot)
    fig.canvas.draw()
    assert len(fig.axes) == 1
    assert "no checkpoint was committed" in fig.axes[0].get_title()
    labels = [str(line.get_label()) for line in fig.axes[0].get_lines()]
    assert not any(label.startswith("checkpoints") for label in labels)
    assert not any(
        isinstance(line, Line2D) and "checkpoints" in str(line.get_label())
        for line in fig.axes[0].get_lines()
    )


def test_no_training_count_is_noted() -> None:
    plot = curve_plot(_result([], None))
    assert "the evaluator counted no practice steps (simulator on the agent's side)" in plot.notes


def test_which_runs_get_the_plot() -> None:
    assert wants_learning_curve(_result(SHORT, 3000))
    assert wants_learning_curve(_result([], 0))  # the task takes checkpoints: none is news
    plain = EvalResult.model_validate(json.loads(DATA.read_text())["return"]["eval_result"])
    assert not wants_learning_curve(plain)  # td3-inverted-pendulum-v1 takes none


def test_the_png_is_written(tmp_path: Path) -> None:
    out = tmp_path / "learning_curve.png"
    plot_learning_curve(_result(SHORT, 3000), out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
