"""The operator's --max-sessions overrides a task's session.max_sessions, with a precise error."""

from __future__ import annotations

from pathlib import Path

import pytest

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.errors import ResourceExhaustedError
from ale_robotics.evaluator import EvaluatorConfig, serve

TASK = "td3-inverted-double-pendulum-v1"


def test_operator_limit_applies(short_tmp: Path, registry) -> None:
    ev = serve(
        EvaluatorConfig(short_tmp / "st", None, task_id=TASK, workers=1, max_sessions=1),
        agent_listen=f"unix://{short_tmp}/a/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        first = RemoteEnv(AleClient(ev.agent_address, ev.agent_token, run_id="r"), kind="practice")
        with pytest.raises(ResourceExhaustedError, match="--max-sessions = 1"):
            RemoteEnv(AleClient(ev.agent_address, ev.agent_token, run_id="r"), kind="practice")
        first.close()
        RemoteEnv(AleClient(ev.agent_address, ev.agent_token, run_id="r"), kind="practice").close()
    finally:
        ev.stop(grace=0.5)
