"""The eval set's statistics, checked against a stratified bootstrap written here.

rliable computes the intervals; these tests recompute them with plain numpy on the
same numbers: once draw for draw (same seed, same resampling scheme: within each task
column, the runs resampled with replacement, from numpy's legacy generator, which is
what rliable 1.2.0 draws from), where the intervals must be equal to rounding; and
once with an independent generator, where they must agree within the Monte Carlo
error of a bootstrap quantile (derived in the test).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from ale_robotics.evalset import (
    EvalSetSpec,
    ScoredRun,
    aggregate,
    render_markdown,
    write_aggregate,
)
from ale_robotics.evalset import rliable_api as R

TASKS = ["td3-inverted-pendulum-v1", "td3-halfcheetah-vec-v1"]


def direct_metrics(b: np.ndarray) -> np.ndarray:
    """Median, IQM, mean and optimality gap of a (runs x tasks) matrix, from their
    definitions (the IQM: sort every score, drop the lowest and highest quarter)."""
    task_means = b.mean(axis=0)
    flat = np.sort(b, axis=None)
    cut = int(0.25 * flat.size)
    iqm = flat[cut : flat.size - cut].mean()
    return np.array(
        [np.median(task_means), iqm, task_means.mean(), 1.0 - np.minimum(b, 1.0).mean()]
    )


def stratified_replicates(
    x: np.ndarray, reps: int, draw: np.random.RandomState | np.random.Generator
) -> np.ndarray:
    """``reps`` bootstrap values of :func:`direct_metrics`: each replicate resamples the
    runs of every task (column) with replacement, independently per column."""
    n, t = x.shape
    cols = np.arange(t)[None, :]
    out = np.empty((reps, 4))
    for i in range(reps):
        if isinstance(draw, np.random.RandomState):
            idx = draw.choice(n, (n, t), replace=True)
        else:
            idx = draw.integers(0, n, (n, t))
        out[i] = direct_metrics(x[idx, cols])
    return out


def percentile_interval(values: np.ndarray, confidence: float) -> np.ndarray:
    tail = (1.0 - confidence) / 2 * 100
    return np.percentile(values, [tail, 100 - tail], axis=0)


def test_intervals_equal_a_direct_stratified_bootstrap_draw_for_draw() -> None:
    x = np.random.default_rng(3).random((5, 3)) * 1.3
    points, cis = R.interval_estimate(x, R.METRICS, reps=400, confidence=0.9, seed=7)
    np.testing.assert_allclose(points, direct_metrics(x), rtol=0, atol=1e-12)
    direct = percentile_interval(
        stratified_replicates(x, 400, np.random.RandomState(7)), confidence=0.9
    )
    np.testing.assert_allclose(cis, direct, rtol=0, atol=1e-12)


def test_intervals_agree_with_an_independent_bootstrap_within_monte_carlo_error() -> None:
    """Different random draws: the bounds differ only by the bootstrap's own noise.

    Each bound is the sample p-quantile of B replicates; its rank in the bootstrap
    distribution is uncertain by sqrt(B p (1 - p)), and the difference between two
    independent estimates by sqrt(2) times that. So rliable's bound must lie between
    our replicates of rank B p -/+ 4 sqrt(2 B p (1 - p)) (4 sigma; the seeds are fixed,
    so the test is deterministic, and it passes with margin).
    """
    reps = 10_000
    x = np.random.default_rng(11).random((10, 3)) * 1.2
    _, cis = R.interval_estimate(x, R.METRICS, reps=reps, confidence=0.95, seed=0)
    ours = np.sort(stratified_replicates(x, reps, np.random.default_rng(12345)), axis=0)
    for j in range(4):
        for row, p in ((0, 0.025), (1, 0.975)):
            half = 4 * math.sqrt(2 * reps * p * (1 - p))
            lo = ours[max(0, math.floor(reps * p - half)), j]
            hi = ours[min(reps - 1, math.ceil(reps * p + half)), j]
            assert lo - 1e-12 <= cis[row, j] <= hi + 1e-12, (R.METRICS[j], row, lo, hi)


def test_the_bootstrap_is_stratified_by_task() -> None:
    """One task always 0, the other always 1: resampling runs within each task can
    only ever give a mean of 0.5, where pooling the runs would spread it widely."""
    x = np.column_stack([np.zeros(6), np.ones(6)])
    _, cis = R.interval_estimate(x, ("mean",), reps=500, confidence=0.95, seed=1)
    assert cis[:, 0].tolist() == [0.5, 0.5]


def test_estimates_leave_numpys_global_generator_as_they_found_it() -> None:
    np.random.seed(99)
    expected = np.random.random(3)
    np.random.seed(99)
    R.interval_estimate(np.ones((3, 1)), ("iqm",), reps=100, confidence=0.95, seed=5)
    np.testing.assert_array_equal(np.random.random(3), expected)


def test_performance_profile_is_the_fraction_of_runs_above_each_threshold() -> None:
    x = np.random.default_rng(5).random((6, 2)) * 1.5
    taus = np.linspace(0, 1.5, 7)
    profile, cis = R.performance_profile(x, taus, reps=200, confidence=0.95, seed=0)
    np.testing.assert_allclose(profile, [(x > t).mean() for t in taus])
    assert np.all(cis[0] <= profile + 1e-12) and np.all(profile <= cis[1] + 1e-12)
    assert np.all((cis >= 0) & (cis <= 1))


def test_refuses_what_is_not_a_score_matrix() -> None:
    with pytest.raises(ValueError, match="matrix"):
        R.interval_estimate(np.ones(3), ("mean",), reps=100, confidence=0.95, seed=0)
    with pytest.raises(ValueError, match="finite"):
        R.interval_estimate(
            np.array([[1.0], [np.nan]]), ("mean",), reps=100, confidence=0.95, seed=0
        )


# --- the aggregate of a set ---------------------------------------------------------


def make_spec(reps: int = 4, **bootstrap: float) -> EvalSetSpec:
    return EvalSetSpec.model_validate(
        {
            "schema_version": 1,
            "tasks": TASKS,
            "agents": [{"label": "good", "cmd": "a"}, {"label": "weak", "cmd": "b"}],
            "repetitions": reps,
            "bootstrap": {"reps": 300, "profile_reps": 200, **bootstrap},
        }
    )


SCORES = {
    (TASKS[0], "good"): [1.02, 0.97, 1.10, 0.88],
    (TASKS[1], "good"): [0.81, 0.95, 0.52, 1.01],
    (TASKS[0], "weak"): [0.20, 0.05, 0.41, 0.33],
    (TASKS[1], "weak"): [0.00, 0.12, 0.09, 0.30],
}


def make_runs(
    scores: Mapping[tuple[str, str], Sequence[float | None]] = SCORES,
) -> list[ScoredRun]:
    return [
        ScoredRun(task, label, k, f"run-{task}-{label}-{k}", s)
        for (task, label), values in scores.items()
        for k, s in enumerate(values)
    ]


def test_cells_and_agents_are_the_direct_bootstrap_of_their_scores() -> None:
    spec = make_spec()
    agg = aggregate(spec, "demo", make_runs())
    assert agg.schema_version == 2
    assert agg.runs_expected == agg.runs_scored == 16
    for cell in agg.cells:
        x = np.array(SCORES[(cell.task_id, cell.label)])[:, None]
        direct = percentile_interval(
            stratified_replicates(x, 300, np.random.RandomState(0)), confidence=0.95
        )
        assert cell.n == 4 and cell.reps == [0, 1, 2, 3] and cell.missing_reps == []
        assert cell.mean is not None and cell.iqm is not None
        assert cell.mean.value == pytest.approx(x.mean(), abs=1e-12)
        assert cell.iqm.value == pytest.approx(direct_metrics(x)[1], abs=1e-12)
        # the cell is one task: median/mean of task means = the mean; column 2 is it
        assert [cell.mean.low, cell.mean.high] == pytest.approx(direct[:, 2], abs=1e-12)
        assert [cell.iqm.low, cell.iqm.high] == pytest.approx(direct[:, 1], abs=1e-12)
    for agent in agg.agents:
        x = np.column_stack([SCORES[(t, agent.label)] for t in TASKS])
        direct = percentile_interval(
            stratified_replicates(x, 300, np.random.RandomState(0)), confidence=0.95
        )
        points = direct_metrics(x)
        for j, name in enumerate(R.METRICS):
            iv = getattr(agent, name)
            assert iv.value == pytest.approx(points[j], abs=1e-12), name
            assert [iv.low, iv.high] == pytest.approx(direct[:, j], abs=1e-12), name
        assert agent.runs_per_task == 4 and agent.note is None
    assert agg.profiles is not None
    assert agg.profiles.taus[0] == 0.0 and agg.profiles.taus[-1] == 1.25  # best 1.10
    good = agg.profiles.agents[0]
    assert good.fraction[0] == 1.0 and good.fraction[-1] == 0.0


def test_the_aggregate_is_reproducible_and_independent_of_the_order_runs_finished() -> None:
    spec = make_spec()
    runs = make_runs()
    first = aggregate(spec, "demo", runs).model_dump(mode="json")
    shuffled = list(runs)
    random.Random(4).shuffle(shuffled)
    assert aggregate(spec, "demo", shuffled).model_dump(mode="json") == first
    other_seed = aggregate(make_spec(seed=1), "demo", runs).model_dump(mode="json")
    assert other_seed["agents"] != first["agents"]  # the seed is what fixes the intervals


def test_failed_runs_unequal_counts_and_unscored_runs() -> None:
    scores: dict[tuple[str, str], list[float | None]] = {
        (TASKS[0], "good"): [1.0, 0.9, 1.1, 0.95],
        (TASKS[1], "good"): [0.5, None, 0.7],  # rep 1 unscored, rep 3 never completed
        (TASKS[0], "weak"): [0.2, 0.1, 0.3, 0.4],
        (TASKS[1], "weak"): [],
    }
    agg = aggregate(make_spec(), "demo", make_runs(scores))
    cell = next(c for c in agg.cells if c.task_id == TASKS[1] and c.label == "good")
    assert (cell.n, cell.reps, cell.unscored_reps, cell.missing_reps) == (2, [0, 2], [1], [3])
    good, weak = agg.agents
    assert good.runs_per_task == 2 and good.note is not None and "first 2" in good.note
    x = np.array([[1.0, 0.5], [0.9, 0.7]])  # the first 2 scored repetitions of each task
    assert good.mean is not None and good.mean.value == pytest.approx(x.mean(axis=0).mean())
    assert weak.iqm is None and weak.note is not None and TASKS[1] in weak.note
    empty = next(c for c in agg.cells if c.task_id == TASKS[1] and c.label == "weak")
    assert empty.n == 0 and empty.mean is None and empty.missing_reps == [0, 1, 2, 3]
    assert agg.runs_scored == 10
    md = render_markdown(agg)
    assert "repetition(s) 0, 1, 2, 3 not completed" in md and "without a score" in md


def test_outputs_json_markdown_and_rliable_plots(tmp_path: Path) -> None:
    agg = aggregate(make_spec(), "demo", make_runs())
    written = write_aggregate(agg, tmp_path)
    names = sorted(p.name for p in written)
    assert names == [
        "aggregate.json",
        "aggregate.md",
        "interval_estimates.png",
        "per_task_iqm.png",
        "performance_profile.png",
    ]
    from ale_robotics.evalset import EvalSetAggregate

    again = EvalSetAggregate.model_validate_json((tmp_path / "aggregate.json").read_text())
    assert again == agg
    for png in tmp_path.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    md = (tmp_path / "aggregate.md").read_text()
    assert "| good | 4 |" in md and "## Per task" in md


def test_a_plot_that_fails_costs_nothing_but_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_a: object, **_k: object) -> Path:
        raise RuntimeError("no fonts")

    monkeypatch.setattr(R, "plot_interval_estimates", broken)
    written = write_aggregate(aggregate(make_spec(), "demo", make_runs()), tmp_path)
    assert [p.name for p in written] == [
        "aggregate.json",
        "aggregate.md",
        "performance_profile.png",
    ]
    assert "interval_estimates.png not drawn (RuntimeError: no fonts)" in caplog.text


def test_the_notes_say_which_agents_declared_training_with_their_seed() -> None:
    spec = make_spec()
    seeded = spec.model_copy(
        update={"agents": [spec.agents[0].model_copy(update={"uses_seed": True}), spec.agents[1]]}
    )
    notes = aggregate(seeded, "s", make_runs()).notes
    assert any("training seed of its own (ALE_SEED" in n for n in notes)
    [declared] = [n for n in notes if n.startswith("declared using it")]
    [undeclared] = [n for n in notes if n.startswith("did not declare")]
    assert declared.endswith(": good") and undeclared.endswith(": weak")
    # nobody declared: every agent is named as possibly varying only the hidden seeds
    notes = aggregate(spec, "s", make_runs()).notes
    assert not any(n.startswith("declared using it") for n in notes)
    assert any(n.startswith("did not declare") and n.endswith("good, weak") for n in notes)
