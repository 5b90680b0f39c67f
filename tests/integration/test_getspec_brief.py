"""GetSpec carries the task brief over real gRPC; the SDK exposes it as ``spec.brief``."""

from __future__ import annotations

from helpers import run_bound_evaluator

from ale_robotics.client import AleClient
from ale_robotics.tasks import Registry
from ale_robotics.tasks.brief import render_brief

TASK = "td3-inverted-pendulum-v2"


def test_getspec_serves_the_brief(registry: Registry) -> None:
    with run_bound_evaluator(registry, TASK, "run-brief-1") as running:
        client = AleClient(running.agent_address, running.agent_token, task_id=TASK)
        with client:
            spec = client.get_spec()
            again = client.get_spec()
    expected = render_brief(registry.get(TASK), registry.manifest_entry(TASK))
    assert spec.brief == expected == again.brief
    assert spec.raw.brief == expected
    assert "## Score" in spec.brief and "982.02" in spec.brief
