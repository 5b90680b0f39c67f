"""Issue 45: an eval set's model cost beside its scores (``evalset/cost.py``), on runs made
here: each agent's mean tokens and calls per run with a stratified-bootstrap interval,
the score-vs-tokens Pareto frontier, the plot drawn only where there are tokens, and a
run that no model gateway counted left out, never counted as 0. The same over real
runs through a real gateway is ``tests/report/test_cost.py``'s."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))  # test_stats' bootstrap written by hand
from test_stats import percentile_interval, stratified_replicates

from ale_robotics.evalset import EvalSetAggregate, EvalSetSpec, ScoredRun, aggregate
from ale_robotics.evalset.aggregate import write_aggregate
from ale_robotics.evalset.cost import pareto_frontier
from ale_robotics.evalset.plots import COST_PNG

TASKS = ["td3-inverted-pendulum-v2", "td3-hopper-v1"]
# label -> per task, per repetition: (score, tokens, calls); tokens None: no gateway
RUNS: dict[str, list[list[tuple[float, int | None, int]]]] = {
    "terse": [[(0.50, 480, 4), (0.60, 520, 4), (0.55, 500, 4)]] * 2,
    "chatty": [[(0.90, 28_800, 6), (0.96, 30_800, 7), (0.93, 29_800, 6)]] * 2,
    "lavish": [[(0.40, 90_000, 20), (0.40, 91_000, 20), (0.40, 92_000, 21)]] * 2,
    "plain": [[(1.00, None, 0), (1.00, None, 0), (1.00, None, 0)]] * 2,
}


def _spec(labels: list[str]) -> EvalSetSpec:
    return EvalSetSpec.model_validate(
        {
            "schema_version": 1,
            "tasks": TASKS,
            "agents": [{"label": label, "cmd": "a"} for label in labels],
            "repetitions": 3,
            "bootstrap": {"reps": 300, "profile_reps": 200, "seed": 1},
        }
    )


def _runs(labels: list[str]) -> list[ScoredRun]:
    return [
        ScoredRun(task, label, k, f"{task}/{label}/{k}", score, True, tokens, calls)
        for label in labels
        for task, reps in zip(TASKS, RUNS[label], strict=True)
        for k, (score, tokens, calls) in enumerate(reps)
        if tokens is not None or label == "plain"
    ]


def test_pareto_frontier_keeps_what_no_other_beats_in_both() -> None:
    points = {"a": (0.5, 500.0), "b": (0.9, 30_000.0), "c": (0.4, 5000.0), "d": (0.9, 40_000.0)}
    assert pareto_frontier(points) == ["a", "b"]  # c: a beats it; d: b ties its score, cheaper
    assert pareto_frontier({"x": (0.7, 100.0), "y": (0.7, 100.0)}) == ["x", "y"]  # equals
    assert pareto_frontier({}) == []


def test_each_agent_has_its_mean_tokens_and_calls_per_run_with_an_interval() -> None:
    labels = ["terse", "chatty", "lavish", "plain"]
    agg = aggregate(_spec(labels), "demo", _runs(labels))
    assert agg.schema_version == 2
    cost = {c.label: c for c in agg.cost}
    for label in ("terse", "chatty", "lavish"):
        c = cost[label]
        tokens = np.array([[t for _, t, _ in reps] for reps in RUNS[label]], dtype=float).T
        # the bootstrap of the scores, draw for draw (test_stats.py's, seed 1): column 2
        # of its replicates is the mean over the tasks' runs
        direct = percentile_interval(
            stratified_replicates(tokens, 300, np.random.RandomState(1)), confidence=0.95
        )
        assert c.tokens is not None and c.tokens.value == pytest.approx(tokens.mean())
        assert [c.tokens.low, c.tokens.high] == pytest.approx(direct[:, 2], abs=1e-9)
        assert c.tokens.low < c.tokens.value < c.tokens.high  # the repetitions differ
        calls = [n for reps in RUNS[label] for _, _, n in reps]
        assert c.calls == pytest.approx(np.mean(calls))
        assert (c.runs_counted, c.runs_uncounted) == (6, 0)
        agent = next(a for a in agg.agents if a.label == label)
        assert c.score == agent.mean  # the mean score across tasks is its other coordinate
    cells = {(c.task_id, c.label): c for c in agg.cells}
    assert cells[(TASKS[0], "terse")].tokens == [480, 520, 500]
    assert cells[(TASKS[0], "terse")].mean_tokens == pytest.approx(500.0)
    # a run no gateway counted has no tokens: never a 0 that would make it the cheapest
    plain = cost["plain"]
    assert plain.tokens is None and plain.calls is None and plain.pareto is None
    assert (plain.runs_counted, plain.runs_uncounted) == (0, 6)
    assert plain.note is not None and "no tokens (not 0)" in plain.note
    assert cells[(TASKS[0], "plain")].tokens == [None, None, None]
    assert cells[(TASKS[0], "plain")].mean_tokens is None
    # terse: fewest tokens; chatty: best score placed; lavish: beaten in both by both
    assert {k: c.pareto for k, c in cost.items()} == {
        "terse": True,
        "chatty": True,
        "lavish": False,
        "plain": None,
    }
    assert agg.no_cost_plot is None


def test_an_agent_counted_on_only_some_tasks_gets_no_mean_and_says_why() -> None:
    runs = [
        r for r in _runs(["terse", "chatty"]) if not (r.label == "chatty" and r.task_id == TASKS[1])
    ]
    runs += [ScoredRun(TASKS[1], "chatty", k, f"x{k}", 0.9, True, None, None) for k in range(3)]
    agg = aggregate(_spec(["terse", "chatty"]), "demo", runs)
    chatty = next(c for c in agg.cost if c.label == "chatty")
    assert chatty.tokens is None and chatty.pareto is None
    assert chatty.note is not None and TASKS[1] in chatty.note
    assert (chatty.runs_counted, chatty.runs_uncounted) == (3, 3)
    terse = next(c for c in agg.cost if c.label == "terse")
    assert terse.pareto is True  # alone on the frontier: the only one placed


def test_unverified_runs_cost_nothing_in_the_aggregate() -> None:
    """The tokens are over the runs the scores are over: an unverified run is left out
    of both (a rewritten result.json moves neither)."""
    runs = _runs(["terse"])
    forged = runs[0]
    runs[0] = ScoredRun(forged.task_id, forged.label, forged.rep, forged.run_id, 1.5, False, 1, 1)
    agg = aggregate(_spec(["terse"]), "demo", runs)
    cell = next(c for c in agg.cells if c.task_id == forged.task_id)
    assert cell.tokens == [520, 500] and cell.unverified_reps == [0]
    assert agg.cost[0].runs_counted == 5


def test_the_plot_is_drawn_where_there_are_tokens_and_not_where_there_are_none(
    tmp_path: Path,
) -> None:
    labels = ["terse", "chatty", "lavish", "plain"]
    agg = aggregate(_spec(labels), "demo", _runs(labels))
    written = {p.name for p in write_aggregate(agg, tmp_path / "with")}
    assert COST_PNG in written
    with Image.open(tmp_path / "with" / COST_PNG) as image:
        assert image.width >= 600 and image.height >= 350
    md = (tmp_path / "with" / "aggregate.md").read_text()
    assert "Pareto frontier (a higher mean score, fewer tokens per run): terse, chatty." in md
    assert "| lavish | 6/6 | 91,000 [" in md and "| no |" in md
    assert "| plain | 0/6 | - | - |" in md
    doc = json.loads((tmp_path / "with" / "aggregate.json").read_text())
    assert EvalSetAggregate.model_validate(doc) == agg

    bare = aggregate(_spec(["plain"]), "demo", _runs(["plain"]))
    assert bare.no_cost_plot is not None and "no tokens to set against the scores" in (
        bare.no_cost_plot
    )
    written = {p.name for p in write_aggregate(bare, tmp_path / "without")}
    assert COST_PNG not in written and "interval_estimates.png" in written
    md = (tmp_path / "without" / "aggregate.md").read_text()
    assert f"No score-vs-tokens plot: {bare.no_cost_plot}." in md


def test_an_aggregate_json_of_schema_1_is_still_read(tmp_path: Path) -> None:
    """aggregate.json files written before the cost (schema 1) are read, without it."""
    agg = aggregate(_spec(["terse"]), "demo", _runs(["terse"]))
    doc = agg.model_dump(mode="json")
    doc["schema_version"] = 1
    for key in ("cost", "no_cost_plot"):
        del doc[key]
    for cell in doc["cells"]:
        del cell["tokens"], cell["mean_tokens"]
    old = EvalSetAggregate.model_validate(doc)
    assert old.schema_version == 1 and old.cost == [] and old.no_cost_plot is None
