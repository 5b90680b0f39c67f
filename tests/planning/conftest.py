"""Fixtures for the planning tests (helpers for spawned planner processes: ``planning_helpers``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# As in tests/hardening: only tests/ is on sys.path, so this directory goes there too, for
# ``import planning_helpers`` here and in the planner processes the tests spawn.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from ale_robotics.planning.world import CollisionWorld


@pytest.fixture(scope="module")
def world() -> Iterator[CollisionWorld]:
    """One PyBullet world per module (loading the Panda takes ~0.2 s)."""
    with CollisionWorld() as w:
        yield w
