"""Names shared by the gateway tests (imported as a top-level module, see conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from scripted_upstream import ScriptedUpstream

from ale_robotics.gateway import ModelGateway

RUN_ID = "run-gateway-test"
MODEL = "scripted-model"

Start = Callable[..., tuple[ModelGateway, ScriptedUpstream]]
"""The ``start_gateway`` fixture: ``start(turns, models=..., budget=..., upstream_url=...,
tools=..., quota=...)``."""
