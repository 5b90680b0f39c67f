"""Fixtures of the run index tests: the shared runs root of real runs (``runs_helpers``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from runs_helpers import RunsRoot, copy_root, runs_root


@pytest.fixture(scope="session")
def made_runs() -> RunsRoot:
    """Four real runs (alpha twice, beta, a smoke run of gamma) under one root; read-only."""
    return runs_root()


@pytest.fixture
def root_copy(made_runs: RunsRoot, tmp_path: Path) -> Path:
    """A private copy of the shared runs root, without an index, to change."""
    return copy_root(made_runs.root, tmp_path / "runs")
