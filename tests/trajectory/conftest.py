"""Fixtures for the trajectory tests; the helpers themselves are in ``trajectory_helpers``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Pytest imports this directory as the namespace package ``tests.trajectory``
# and puts only ``tests/`` on sys.path; the test modules import their helpers
# as a top-level ``trajectory_helpers`` module, so this directory goes there too.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from trajectory_helpers import EVALUATOR_KEY, OTHER_KEY, RUN_ID, write_standard_run

from ale_robotics.trajectory import EvaluatorSigner


@pytest.fixture
def signer() -> EvaluatorSigner:
    return EvaluatorSigner.from_private_bytes(EVALUATOR_KEY)


@pytest.fixture
def other_signer() -> EvaluatorSigner:
    return EvaluatorSigner.from_private_bytes(OTHER_KEY)


@pytest.fixture
def standard_run(tmp_path: Path, signer: EvaluatorSigner) -> Path:
    """The 12-event run of :func:`trajectory_helpers.write_standard_run`."""
    path = tmp_path / "runs" / RUN_ID / "trajectory.jsonl"
    write_standard_run(path, signer)
    return path
