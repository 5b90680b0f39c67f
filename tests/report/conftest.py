"""Fixtures for the report tests: one runs root of real runs, made once per session
(~40 s); the helpers that make them are in ``report_helpers``."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# As in tests/cli: the test modules import their helpers as a top-level module.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from report_helpers import (
    HOSTILE,
    PENDULUM,
    SUBMIT,
    TRAIN,
    WALKER,
    Runs,
    interrupted_run,
    real_run,
)


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
