"""Fixtures shared by the per-task invariant tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve


@pytest.fixture(scope="module")
def server() -> Iterator[RunningEvaluator]:
    """One evaluator serving every task (no task or run bound), for GetSpec-level checks."""
    with tempfile.TemporaryDirectory(prefix="ale-tasks-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, workers=1),
            agent_listen=f"unix://{d}/a/a.sock",
            harness_listen=f"unix://{d}/h.sock",
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)
