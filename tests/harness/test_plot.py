"""``episodes.png`` draws the task's primary metric per episode, from real results.

The fixtures (``data/plot_results.json``, see its ``_about``) are EvalResults of
real runs, one per kind of task: a return, a lower-is-better cost, success per
replayed instance, a planner with failed and colliding problems, EDMP, an
interactive session the agent abandoned, and a smoke run. The tests read what
is drawn off the figure itself (bar heights, labels, ticks, window extents).
"""

from __future__ import annotations

import json
import math
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from ale_robotics.evaluator.results.metrics import METRICS, compute
from ale_robotics.harness.plots.episodes import (
    NOT_PER_EPISODE,
    PER_EPISODE,
    EpisodePlot,
    episode_plot,
    episodes_figure,
    plot_episodes,
)
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import episode_outcomes
from ale_robotics.model.result import EpisodeRecord, EvalResult, Floor, SmokeRun
from ale_robotics.tasks import Direction, MetricSpec, default_registry

DATA = Path(__file__).parent / "data" / "plot_results.json"
KINDS = [
    "return",
    "cost_abandoned",
    "success_abandoned",
    "success_replay",
    "planner_failures",
    "edmp",
    "smoke",
]
FAILED_RED = (0xC4 / 255, 0x4E / 255, 0x52 / 255, 1.0)


@cache
def _fixtures() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def load(kind: str) -> tuple[EvalResult, float | None]:
    entry = _fixtures()[kind]
    return EvalResult.model_validate(entry["eval_result"]), entry["target"]


def outcomes_of(result: EvalResult) -> list[EpisodeOutcome]:
    if result.outcomes is not None:
        return episode_outcomes(result.outcomes)
    return [
        EpisodeOutcome(e.index, e.episode_return, e.length, e.terminated, success=e.success)
        for e in result.episodes
    ]


def drawn(kind: str) -> tuple[EpisodePlot, Figure]:
    result, target = load(kind)
    plot = episode_plot(result, target)
    fig = episodes_figure(plot)
    fig.canvas.draw()
    return plot, fig


def bars(fig: Figure, axes: int = 0) -> list[Rectangle]:
    return [p for p in fig.axes[axes].patches if isinstance(p, Rectangle)]


def hlines(fig: Figure) -> dict[str, float]:
    """label -> y of every horizontal line on the bars' axes."""
    return {
        str(line.get_label()): float(np.asarray(line.get_ydata())[0])
        for line in fig.axes[0].get_lines()
        if not str(line.get_label()).startswith("_")
    }


# ------------------------------------------------------------- the metric --


def test_every_metric_has_a_per_episode_value_but_the_spread() -> None:
    """A new metric in metrics.py must be given its per-episode value here (or be drawn as
    the return, saying so)."""
    assert set(METRICS) - set(PER_EPISODE) == NOT_PER_EPISODE
    assert set(PER_EPISODE) <= set(METRICS)


@pytest.mark.parametrize("kind", KINDS)
def test_per_episode_values_average_to_the_evaluators_metrics(kind: str) -> None:
    result, _ = load(kind)
    outcomes = outcomes_of(result)
    expected = compute(outcomes, METRICS)
    for name, (fn, _, _) in PER_EPISODE.items():
        values = [fn(o) for o in outcomes]
        if name not in expected:
            assert any(v is None for v in values), name
            continue
        assert all(v is not None for v in values), name
        mean = math.fsum(float(v) for v in values if v is not None) / len(values)
        assert mean == pytest.approx(expected[name], rel=1e-12, abs=1e-12), name
        if name in result.metrics:
            assert mean == pytest.approx(result.metrics[name], rel=1e-12, abs=1e-12), name


@pytest.mark.parametrize("kind", KINDS)
def test_bars_are_the_primary_metric_per_episode_with_its_direction(kind: str) -> None:
    result, target = load(kind)
    task = default_registry().get(result.task_id)
    primary = task.primary_metric
    plot, fig = drawn(kind)
    fn = PER_EPISODE[primary.name][0]
    expected = [fn(o) for o in outcomes_of(result)]
    assert plot.metric == primary.name
    assert list(plot.values) == expected
    assert [b.get_height() for b in bars(fig)] == pytest.approx(expected)
    ylabel = fig.axes[0].get_ylabel()
    assert primary.name in ylabel
    arrow = "↑ higher" if primary.direction is Direction.HIGHER_IS_BETTER else "↓ lower"
    assert f"{arrow} is better" in ylabel
    lines = hlines(fig)
    assert lines[f"measured {primary.name} {result.metrics[primary.name]:.4g}"] == pytest.approx(
        result.metrics[primary.name]
    )
    if target is None:
        assert not any(k.startswith("paper") for k in lines)
        assert "no paper target synced (unscored)" in plot.notes
    else:
        assert lines[f"paper {primary.name} {target:g}"] == target


def test_return_task_draws_returns_and_the_paper_target() -> None:
    plot, fig = drawn("return")
    result, _ = load("return")
    assert plot.values == tuple(e.episode_return for e in result.episodes)
    assert fig.axes[0].get_ylabel() == "return per episode\nmean_return: ↑ higher is better"
    assert hlines(fig)["paper mean_return 982.02"] == 982.02
    assert plot.strip == () and len(fig.axes) == 1  # batch rollouts: nothing to mark


def test_the_floor_is_a_line_in_the_metrics_own_unit() -> None:
    """Issue 48.10: what doing nothing measured on the same hidden seeds (the result's
    floor) is drawn beside the measurement and the paper, and said in the legend."""
    result, target = load("return")
    assert result.floor is None and episode_plot(result, target).floor is None
    floored = result.model_copy(
        update={"floor": Floor(policy="zero_output", metrics={"mean_return": 23.2})}
    )
    plot = episode_plot(floored, target)
    assert (plot.floor, plot.floor_policy) == (23.2, "zero_output")
    fig = episodes_figure(plot)
    assert hlines(fig)["floor 23.2 (doing nothing: zero weights)"] == 23.2
    low, high = fig.axes[0].get_ylim()
    assert low <= 23.2 <= high
    assert "floor 23.2 (doing nothing: zero weights)" in [
        t.get_text() for t in fig.legends[0].get_texts()
    ]
    # a cost task: the floor's cost, on the cost axis (not the return's)
    cost, cost_target = load("cost_abandoned")
    floor = Floor(policy="null_action", metrics={"mean_cost": 4.5, "mean_return": -4.5})
    plot = episode_plot(cost.model_copy(update={"floor": floor}), cost_target)
    assert plot.metric == "mean_cost" and plot.floor == 4.5
    assert hlines(episodes_figure(plot))["floor 4.5 (doing nothing: null action)"] == 4.5


def test_cost_task_draws_minus_the_return_lower_is_better() -> None:
    plot, fig = drawn("cost_abandoned")
    result, _ = load("cost_abandoned")
    assert plot.values == tuple(-e.episode_return for e in result.episodes)
    assert all(v > 0 for v in plot.values)
    assert fig.axes[0].get_ylabel() == (
        "cost (= −return) per episode\nmean_cost: ↓ lower is better"
    )
    assert hlines(fig)["paper mean_cost 4.1"] == 4.1


def test_success_per_replayed_instance_is_0_or_1_labelled_with_its_index() -> None:
    plot, fig = drawn("success_replay")
    result, _ = load("success_replay")
    assert plot.binary and set(plot.values) <= {0.0, 1.0}
    assert fig.axes[0].get_ylim() == pytest.approx((-0.04, 1.08))
    assert "per instance" in fig.axes[0].get_ylabel()
    # the hidden 20 of 40 published instances: ticks name their positions, not 0..19
    indices = [e.index for e in result.episodes]
    assert indices != list(range(len(indices)))
    labels = [int(t.get_text()) for t in fig.axes[-1].get_xticklabels()]
    ticks = [int(x) for x in fig.axes[-1].get_xticks()]
    assert labels == [indices[t] for t in ticks]
    assert plot.strip == ("failed",)


# ------------------------------------------- abandoned, failed, collided --


def strip_rows(fig: Figure) -> dict[str, list[int]]:
    """Strip row label -> the episode positions marked in it."""
    sx = fig.axes[-1]
    names = [t.get_text() for t in sx.get_yticklabels()]
    rows: dict[str, list[int]] = {n: [] for n in names}
    for line in sx.get_lines():
        ys = np.asarray(line.get_ydata()).tolist()
        xs = np.asarray(line.get_xdata()).tolist()
        if line.get_marker() not in ("None", "", None) and ys:
            rows[names[int(ys[0])]] = [int(x) for x in xs]
    return rows


@pytest.mark.parametrize("kind", ["cost_abandoned", "success_abandoned"])
def test_abandoned_episodes_are_hatched_marked_and_counted(kind: str) -> None:
    plot, fig = drawn(kind)
    result, _ = load(kind)
    gone = [i for i, e in enumerate(result.episodes) if e.abandoned]
    assert gone  # the agent left 6 of 10
    assert [i for i, a in enumerate(plot.abandoned) if a] == gone
    assert [i for i, b in enumerate(bars(fig)) if b.get_hatch()] == gone
    assert strip_rows(fig)[f"abandoned ({len(gone)})"] == gone
    assert any(f"{len(gone)} of 10 episodes abandoned" in n for n in plot.notes)
    assert any("null action" in n for n in plot.notes)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "abandoned" in legend


def test_interactive_run_without_abandoned_episodes_says_none() -> None:
    plot, fig = drawn("smoke")
    assert strip_rows(fig) == {"abandoned (0)": []}
    assert not any("abandoned" in n for n in plot.notes)


def test_planner_failures_and_collisions_are_marked_per_problem() -> None:
    plot, fig = drawn("planner_failures")
    result, _ = load("planner_failures")
    assert result.outcomes is not None and result.outcomes.backend == "planner"
    problems = result.outcomes.problems
    assert plot.values == tuple(p.planning_time_s for p in problems)
    assert fig.axes[0].get_ylabel() == (
        "planning time [s] per problem\nplanning_time: ↓ lower is better"
    )
    failed = [i for i, p in enumerate(problems) if not p.success]
    collided = [i for i, p in enumerate(problems) if p.collided]
    assert failed and collided
    rows = strip_rows(fig)
    assert rows[f"failed ({len(failed)})"] == failed
    assert rows[f"collided ({len(collided)})"] == collided
    assert [i for i, b in enumerate(bars(fig)) if b.get_facecolor() == FAILED_RED] == failed
    assert f"{len(failed)} of 40 problems failed" in plot.notes
    assert plot.secondary is None  # the bars are already the planning time


def test_edmp_draws_success_and_the_planning_time_per_problem() -> None:
    plot, fig = drawn("edmp")
    result, _ = load("edmp")
    assert result.outcomes is not None and result.outcomes.backend == "edmp"
    problems = result.outcomes.problems
    assert plot.metric == "success_rate"
    assert plot.values == tuple(float(p.success) for p in problems)
    assert plot.secondary is not None
    assert [b.get_height() for b in bars(fig, 1)] == [p.planning_time_s for p in problems]
    assert "planning_time" in fig.axes[1].get_ylabel()
    rows = strip_rows(fig)
    assert rows["failed (4)"] == [i for i, p in enumerate(problems) if not p.success]
    assert rows["collided (4)"] == [i for i, p in enumerate(problems) if p.collided]


# ------------------------------------------------------------- smoke runs --


def test_a_smoke_run_says_so_in_the_title() -> None:
    plot, fig = drawn("smoke")
    assert plot.smoke == "smoke run: 3 of 10 episodes, not official"
    assert "smoke run: 3 of 10 episodes, not official" in fig.get_suptitle()
    _, full = drawn("return")
    assert full.get_suptitle() and "smoke" not in full.get_suptitle()


def test_a_planner_smoke_run_counts_problems() -> None:
    result, _ = load("planner_failures")
    smoke = result.model_copy(update={"smoke_run": SmokeRun(episodes=40, of=80)})
    assert episode_plot(smoke, None).smoke == "smoke run: 40 of 80 problems, not official"


# ------------------------------------------------------------------ layout --


def many_episodes(n: int = 100) -> EvalResult:
    result, _ = load("return")
    episodes = [
        EpisodeRecord(
            index=i,
            seed_commitment="0" * 64,
            episode_return=900.0 + (i * 37) % 100,
            length=1000,
            terminated=False,
        )
        for i in range(n)
    ]
    return result.model_copy(update={"episodes": episodes, "outcomes": None})


def figures() -> list[tuple[str, Figure]]:
    out = [(kind, drawn(kind)[1]) for kind in KINDS]
    fig = episodes_figure(episode_plot(many_episodes(), 982.02))
    fig.canvas.draw()
    return [*out, ("100 episodes", fig)]


@pytest.mark.parametrize(("kind", "fig"), figures())
def test_episode_ticks_are_integers_and_readable(kind: str, fig: Figure) -> None:
    ax = fig.axes[-1]
    ticks = list(ax.get_xticks())
    labels = ax.get_xticklabels()
    assert ticks == [int(t) for t in ticks]
    assert all(t.get_text().isdigit() for t in labels)
    assert 1 < len(ticks) <= 20
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [t.get_window_extent(renderer) for t in labels]
    for a, b in pairwise(boxes):
        assert a.x1 < b.x0, f"{kind}: tick labels overlap"


@pytest.mark.parametrize(("kind", "fig"), figures())
def test_legend_and_titles_never_cover_the_bars(kind: str, fig: Figure) -> None:
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    (legend,) = fig.legends
    lb = legend.get_window_extent(renderer)
    for ax in fig.axes:
        assert not lb.overlaps(ax.get_window_extent(renderer)), kind
        for bar in ax.patches:
            assert not lb.overlaps(bar.get_window_extent(renderer)), kind
    suptitle: Text | None = getattr(fig, "_suptitle", None)  # matplotlib has no getter
    texts = [fig.axes[0].title, *([suptitle] if suptitle is not None else [])]
    for text in texts:
        if text.get_text():
            tb = text.get_window_extent(renderer)
            for ax in fig.axes:
                assert not tb.overlaps(ax.get_window_extent(renderer)), kind
    whole = fig.bbox
    ylabels = [ax.yaxis.label for ax in fig.axes if ax.get_ylabel()]
    for artist in [legend, *texts, *ylabels]:
        box = artist.get_window_extent(renderer)
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1, f"{kind}: cut off"
        assert whole.y0 <= box.y0 and box.y1 <= whole.y1, f"{kind}: cut off"


def test_one_hundred_episodes_tick_every_fifth() -> None:
    fig = episodes_figure(episode_plot(many_episodes(), None))
    assert list(fig.axes[-1].get_xticks()) == list(range(0, 100, 5))
    assert len(bars(fig)) == 100


# ----------------------------------------------------------- fallbacks, png --


def test_a_primary_metric_without_per_episode_values_is_drawn_as_the_return() -> None:
    result, target = load("return")
    task = default_registry().get(result.task_id)
    spread = MetricSpec(name="std_return", direction=Direction.LOWER_IS_BETTER)
    odd = task.model_copy(update={"metrics": [spread]})
    plot = episode_plot(result, target, odd)
    assert plot.metric == "mean_return"
    assert plot.target is None  # the target is on std_return, not on the bars
    assert "std_return has no per-episode value: showing the return per episode" in plot.notes
    assert "paper target 982.02 is on std_return: not drawn" in plot.notes


def test_an_unknown_task_is_drawn_as_the_return() -> None:
    result, _ = load("return")
    plot = episode_plot(result.model_copy(update={"task_id": "no-such-task-v1"}), 1.0)
    assert plot.metric == "mean_return" and plot.target is None
    assert "no task config: showing the return per episode" in plot.notes


def test_plot_episodes_keeps_its_old_call_and_takes_the_task(tmp_path: Path) -> None:
    result, target = load("cost_abandoned")
    plot_episodes(result, target, tmp_path / "a.png")  # the harness's call
    task = default_registry().get(result.task_id)
    plot_episodes(result, target, tmp_path / "b.png", task=task)
    for name in ("a.png", "b.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_control_loop_metrics_per_episode_average_to_the_evaluators() -> None:
    """The ros kind's timing metrics are means of one value per episode; the held commands'
    rate is pooled over all steps (NOT_PER_EPISODE), which a mean of rates would not give."""
    from ale_robotics.model.control_loop import ControlLoop

    def loop(p50: float, p99: float, start: float, held: int) -> ControlLoop:
        holds = ((0, held, 1),) if held else ()
        return ControlLoop(holds, 0, held, p50, p99, p99, 0.0, start)

    outcomes = [
        EpisodeOutcome(0, 10.0, 100, False, control=loop(800.0, 2500.0, 1.5, 0)),
        EpisodeOutcome(1, 5.0, 20, True, control=loop(1200.0, 4100.0, 2.5, 10)),
    ]
    expected = compute(outcomes, METRICS)
    for name in ("command_latency_p50_ms", "command_latency_p99_ms", "graph_start_s"):
        fn = PER_EPISODE[name][0]
        values = [fn(o) for o in outcomes]
        assert expected[name] == pytest.approx(sum(float(v or 0) for v in values) / 2), name
    assert expected["command_latency_p50_ms"] == pytest.approx(1.0)
    held_mean_of_rates = (0 / 100 + 10 / 20) / 2
    assert expected["held_command_rate"] == pytest.approx(10 / 120) != held_mean_of_rates
