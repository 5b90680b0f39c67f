"""Fixtures for the report tests: one runs root of real runs, made once per session
(~40 s); the helpers that make them are in ``report_helpers``."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# As in tests/cli: the test modules import their helpers as a top-level module (and
# the run index tests' helpers: the forger).
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
if str(Path(__file__).parents[1] / "runs") not in sys.path:
    sys.path.insert(0, str(Path(__file__).parents[1] / "runs"))
if str(Path(__file__).parents[1] / "gateway") not in sys.path:  # the scripted upstream
    sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))

from cost_helpers import cost_runs
from report_helpers import (
    HOPPER,
    HOSTILE,
    PENDULUM,
    REJECTED,
    SET_NAME,
    SUBMIT,
    TRAIN,
    WALKER,
    Runs,
    eval_set,
    interrupted_run,
    real_run,
)
from runs_helpers import forge, zeroed_checkpoint


@pytest.fixture(scope="session")
def real_runs() -> Iterator[Runs]:
    """Six real runs under one root (a short path: the run's sockets live under it)."""
    base = Path(tempfile.mkdtemp(prefix="ale-rep-"))
    try:
        dirs = {
            "alpha": real_run(base, "alpha", PENDULUM, SUBMIT, "--label", "alpha"),
            "beta": real_run(base, "beta", PENDULUM, SUBMIT, "--label", "beta"),
            "smoke": real_run(
                base, "smoke", PENDULUM, SUBMIT, "--label", "alpha", "--episodes", "2"
            ),
            "hostile": real_run(base, "hostile", PENDULUM, HOSTILE, "--label", "hostile"),
            "walker": real_run(base, "walker", WALKER, TRAIN, "--label", "td3_train"),
            "stopped": interrupted_run(base, "stopped"),
        }
        yield Runs(base / "runs", dirs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def no_result_runs(real_runs: Runs) -> Iterator[Runs]:
    """real_runs' alpha, beta and walker (copied) and two runs with no result: a rejected
    submission and an interactive agent that never opened its eval session, with labels
    long enough that the index must break them between their words. Apart from real_runs
    so that neither fixture's setup runs past the test timeout on a loaded host."""
    base = Path(tempfile.mkdtemp(prefix="ale-nores-"))
    try:
        for name in ("alpha", "beta", "walker"):
            shutil.copytree(
                real_runs.dirs[name],
                base / "runs" / name,
                ignore=shutil.ignore_patterns("scratch", "submission", "*.sock"),
            )
        dirs = {name: base / "runs" / name for name in ("alpha", "beta", "walker")}
        dirs["rejected"] = real_run(
            base, "rejected", PENDULUM, REJECTED, "--label", "rejected_renamed_key",
            "--sandbox", "none", "--no-videos",
        )  # fmt: skip
        dirs["silent"] = real_run(
            base, "silent", HOPPER, "python -c pass", "--label",
            "interactive_agent_without_an_eval_session", "--sandbox", "none", "--no-videos",
        )  # fmt: skip
        yield Runs(base / "runs", dirs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def set_runs() -> Iterator[Runs]:
    """A real eval set (``report_helpers.eval_set``: the pendulum, labels td3 and zero, two
    repetitions of smoke runs), then zero's repetition 1 forged to claim the cap, 1.5
    (``runs_helpers.forge``: its trajectory untouched). ``dirs``: each run by
    ``LABEL/rep<k>``, and ``forged``."""
    base = Path(tempfile.mkdtemp(prefix="ale-set-"))
    try:
        root = eval_set(base, zeroed_checkpoint(base / "zeroed.safetensors"))
        cells = root / SET_NAME / PENDULUM
        dirs = {f"{d.parent.name}/{d.name}": d for d in sorted(cells.glob("*/rep*")) if d.is_dir()}
        assert sorted(dirs) == ["td3/rep0", "td3/rep1", "zero/rep0", "zero/rep1"], dirs
        forge(dirs["zero/rep1"], dirs["td3/rep0"], 1.5 * 982.02)
        yield Runs(root, {**dirs, "forged": dirs["zero/rep1"]})
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def model_cost_runs() -> Iterator[Path]:
    """A real eval set of two agents reaching their model through each run's gateway and
    a run without one (``cost_helpers.cost_runs``, ~45 s): the runs root."""
    base = Path(tempfile.mkdtemp(prefix="ale-cost-"))
    try:
        yield cost_runs(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
