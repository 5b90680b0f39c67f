"""Our evaluator against the package's compliance suite, for every interactive task."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ale_robotics import compliance
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.tasks import TaskMode, default_registry

INTERACTIVE = [e.spec.id for e in default_registry() if e.spec.mode is TaskMode.INTERACTIVE]


def test_there_is_an_interactive_task() -> None:
    assert "td3-inverted-double-pendulum-v1" in INTERACTIVE


@pytest.fixture(scope="module", params=INTERACTIVE)
def ale_endpoint(request: pytest.FixtureRequest) -> Iterator[compliance.Endpoint]:
    """One evaluator per task, not bound to a run, so eval tests can use fresh run ids."""
    with tempfile.TemporaryDirectory(prefix="ale-c-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=request.param, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
        )
        try:
            yield compliance.Endpoint(running.agent_address, running.agent_token, request.param)
        finally:
            running.stop(grace=0.5)


class TestOurServer(compliance.AleEnvCompliance):
    pass
