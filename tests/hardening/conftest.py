"""Fixtures for the hardening tests; the helpers themselves are in ``hardening_helpers``."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Same arrangement as tests/trajectory: only tests/ is on sys.path, so this
# directory goes there too for the test modules' ``import hardening_helpers``.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from hardening_helpers import RUN, TASK_ID

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import Registry


@pytest.fixture(scope="module")
def module_tmp() -> Iterator[Path]:
    """A short per-module directory (Unix socket paths are limited to ~107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ale-h-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def shared_evaluator(module_tmp: Path, registry: Registry) -> Iterator[RunningEvaluator]:
    """One real evaluator for a whole module (warm worker pool), with a large quota.

    The agent socket has a directory of its own, as the sandbox requires.
    """
    volume = module_tmp / "vol"
    volume.mkdir()
    running = serve(
        EvaluatorConfig(
            module_tmp / "state",
            volume,
            task_id=TASK_ID,
            run_id=RUN,
            workers=1,
            max_submissions_per_run=100_000,
        ),
        agent_listen=f"unix://{module_tmp}/agent/a.sock",
        harness_listen=f"unix://{module_tmp}/h.sock",
        registry=registry,
    )
    try:
        yield running
    finally:
        running.stop(grace=0.5)
