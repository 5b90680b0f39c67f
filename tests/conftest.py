"""Shared fixtures: real evaluators on real Unix sockets, random policies, the bundled registry."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ale_robotics.evaluator.execution.blas import worker_blas_env

# The rollout workers' OpenBLAS kernel in this process too, before numpy loads here: tests
# compare what workers compute with the same shards run in process, to the bit.
assert "numpy" not in sys.modules, "numpy loaded before tests/conftest.py could pin its kernel"
os.environ.update(worker_blas_env())

import pytest  # noqa: E402

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve  # noqa: E402
from ale_robotics.tasks import Registry, TaskSpec, default_registry  # noqa: E402

TASK_ID = "td3-inverted-pendulum-v1"

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Runs render no evaluation videos unless a test asks (--videos K): rendering 3 episodes
# costs seconds of CPU per run, and most tests run many runs (tests/harness/test_videos.py).
os.environ.setdefault("ALE_VIDEOS", "0")


@pytest.fixture(autouse=True)
def _private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test gets its own ``XDG_STATE_HOME`` (inherited by the harness processes it
    starts): runs record their run directories there, and no test may touch the real
    user's state (or see another test's runs)."""
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old


@pytest.fixture(scope="session")
def registry() -> Registry:
    return default_registry()


@pytest.fixture(scope="session")
def task(registry: Registry) -> TaskSpec:
    return registry.get(TASK_ID)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short path: Unix socket paths are limited to ~107 bytes."""
    with tempfile.TemporaryDirectory(prefix="ale-t-") as d:
        yield Path(d)


@pytest.fixture
def evaluator(short_tmp: Path, registry: Registry) -> Iterator[RunningEvaluator]:
    """A real evaluator on two Unix sockets, bound to one run, with 1 worker process."""
    volume = short_tmp / "submission"
    volume.mkdir()
    running = serve(
        EvaluatorConfig(
            short_tmp / "state",
            volume,
            task_id=TASK_ID,
            run_id="run-test-1",
            workers=1,
            max_submissions_per_run=50,
        ),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        yield running
    finally:
        running.stop(grace=0.5)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` (make test) as pytest-xdist means it, under pytest 9.

    xdist 3.8 names an ``xdist_group`` test's group by appending ``@group`` to
    ``item._nodeid``, which pytest 9 no longer reads (a node's id is ``item._id``): the
    groups were silently ignored and a grouped module's tests spread over both workers
    (tests/hardening/test_fuzz_protocol.py's last test then saw none of the fuzzers' codes
    of the other worker). Done here the way pytest 9 stores it, on the workers of a
    loadgroup run only; an id that does not come out with its suffix fails the run, so a
    later pytest or xdist that changes this again cannot split the groups unnoticed.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
             for m in item.iter_markers("xdist_group")}
        )  # fmt: skip
        if not names or "@" in item.nodeid:
            continue
        wanted = f"{item.nodeid}@{'_'.join(names)}"
        item._id = coerce_node_id(wanted)  # type: ignore[attr-defined]
        assert item.nodeid == wanted, f"cannot group {item.nodeid} for xdist (loadgroup)"
