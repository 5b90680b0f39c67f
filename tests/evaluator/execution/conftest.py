"""Executors under test, one of each per module (a Ray instance starts once per module).

Ray here: a private local instance of 2 CPUs and a 200 MB object store, shut down at
the end of each module that uses it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# As in tests/hardening: only tests/ is on sys.path, so this directory goes there too
# for the test modules' ``import execution_helpers``.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from execution_helpers import OBJECT_STORE_BYTES, WORKERS

from ale_robotics.evaluator.execution import Executor, LocalExecutor


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[Executor]:
    from ale_robotics.evaluator.execution.ray import RayExecutor

    ex = RayExecutor(WORKERS, object_store_bytes=OBJECT_STORE_BYTES)
    try:
        yield ex
    finally:
        ex.shutdown()


@pytest.fixture(scope="module")
def local_executor() -> Iterator[Executor]:
    ex = LocalExecutor(WORKERS)
    try:
        yield ex
    finally:
        ex.shutdown()


@pytest.fixture(scope="module", params=["local", "ray"])
def executor(request: pytest.FixtureRequest) -> Executor:
    """Each executor in turn: the contract suite runs against both."""
    return request.getfixturevalue(f"{request.param}_executor")  # type: ignore[no-any-return]
