"""Fixtures for the model gateway tests: a scripted upstream, a gateway in front of it."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

# As tests/trajectory/conftest.py: the helpers here are imported as top-level modules.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from gateway_helpers import MODEL, RUN_ID, Start
from scripted_upstream import UPSTREAM_KEY, ScriptedUpstream, Turn

from ale_robotics.gateway import GatewayPolicy, ModelGateway
from ale_robotics.trajectory import TrajectoryWriter


@pytest.fixture
def start_gateway(short_tmp: Path) -> Iterator[Start]:
    """``start(turns, models=..., budget=..., tools=..., quota=...)`` -> a started (gateway,
    upstream) pair; the
    gateway listens on a Unix socket and on a loopback port, and records into short_tmp."""
    started: list[tuple[ModelGateway, ScriptedUpstream]] = []

    def start(
        turns: Sequence[Turn] = (),
        *,
        models: Sequence[str] = (MODEL,),
        budget: int | None = None,
        upstream_url: str | None = None,
        tools: Sequence[str] = (),
        quota: int | None = None,
    ) -> tuple[ModelGateway, ScriptedUpstream]:
        upstream = ScriptedUpstream(list(turns)).start()
        gateway = ModelGateway(
            upstream=upstream_url or upstream.url + "/v1",
            upstream_key=UPSTREAM_KEY,
            policy=GatewayPolicy.of(models, budget, tools),
            quota_bytes=quota,
            socket_path=short_tmp / "gw" / "gateway.sock",
            transcript=short_tmp / "model_calls.jsonl",
            trajectory=TrajectoryWriter(short_tmp / "trajectory.jsonl", RUN_ID),
            tcp=True,
        ).start()
        started.append((gateway, upstream))
        return gateway, upstream

    yield start
    for gateway, upstream in started:
        gateway.stop()
        upstream.stop()
