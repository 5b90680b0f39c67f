"""Smaller edges third-party tooling hits: reflection v1, Gymnasium 0.29, ``num_envs=0``.

Real evaluators on real Unix sockets; the Gymnasium 0.29 case runs in a child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2
from helpers import run_bound_evaluator

from ale_robotics.client import AleClient, RemoteSession
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.tasks import Registry

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-edge-1"


@pytest.fixture(scope="module")
def eevaluator(registry: Registry) -> Iterator[RunningEvaluator]:
    with run_bound_evaluator(registry, TASK, RUN) as running:
        yield running


def _reflect(address: str, version: str, request: reflection_pb2.ServerReflectionRequest) -> Any:
    """One reflection request over ``grpc.reflection.<version>``, with no token."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        return next(iter(call(iter([request]), timeout=10)))


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_v1_and_v1alpha_need_no_token(
    eevaluator: RunningEvaluator, version: str
) -> None:
    """grpcurl and current tools ask for v1 first; only v1alpha used to be served."""
    for address in (eevaluator.agent_address, eevaluator.harness_address):
        listed = _reflect(
            address, version, reflection_pb2.ServerReflectionRequest(list_services="")
        )
        names = {s.name for s in listed.list_services_response.service}
        assert {"ale_robotics.v1.AleEnv", "grpc.health.v1.Health"} <= names
        assert "grpc.reflection.v1.ServerReflection" in names
        found = _reflect(
            address,
            version,
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="ale_robotics.v1.AleEnv"),
        )
        assert found.file_descriptor_response.file_descriptor_proto


def test_num_envs_zero_is_refused_by_the_sdk(eevaluator: RunningEvaluator) -> None:
    """``num_envs=0`` used to open a one-env session silently (0 is proto3's "unset" on
    the wire, documented as 1 there); the SDK refuses it before any call."""
    client = AleClient(eevaluator.agent_address, eevaluator.agent_token, task_id=TASK)
    with client, pytest.raises(InvalidArgumentError, match="num_envs must be at least 1, got 0"):
        RemoteSession(client, kind="practice", num_envs=0)
    assert eevaluator.evaluator.sessions.count(RUN) == 0


_GYMNASIUM_029 = """
import gymnasium, gymnasium.vector
# Gymnasium 0.29's vector API has no AutoresetMode (CleanRL pins 0.29.1).
del gymnasium.vector.AutoresetMode
gymnasium.__version__ = "0.29.1"
from ale_robotics.client import RemoteEnv
env = RemoteEnv.from_env()
env.reset(seed=0)
env.step(env.action_space.sample())
env.close()
try:
    from ale_robotics.client import RemoteVectorEnv
except ImportError as exc:
    print("refused:", exc)
"""


def test_gymnasium_0_29_gets_remote_env_and_a_message_for_the_vector_env(
    eevaluator: RunningEvaluator,
) -> None:
    """The SDK's Gymnasium envs used to fail to import under gymnasium < 1.0. ``RemoteEnv``
    now needs only the single-env API; ``RemoteVectorEnv`` names the version it needs.
    (Checked by hand against a real gymnasium 0.29.1 as well: see the issue's report.)"""
    env = {
        **os.environ,
        "ALE_ENDPOINT": eevaluator.agent_address,
        "ALE_TOKEN": eevaluator.agent_token,
        "ALE_TASK_ID": TASK,
        "ALE_RUN_ID": RUN,
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_GYMNASIUM_029)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: RemoteVectorEnv needs gymnasium >= 1.0 (this is gymnasium 0.29.1)" in (
        done.stdout
    )
