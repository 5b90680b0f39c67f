"""The harness's relay to a remote evaluator: real gRPC through a real Unix socket to a real
TLS listener on loopback, a dead replica tried first, a stream carried, mutual TLS."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tls_helpers import Certs, make_certs

from ale_robotics.client.sdk import AleClient
from ale_robotics.client.tls import ClientTls
from ale_robotics.errors import UnavailableError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.server.tls import ServerTls
from ale_robotics.harness.remote.relay import EvaluatorRelay, Upstream
from ale_robotics.tasks import Registry

TASK_ID = "td3-inverted-pendulum-v1"


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
def mtls_evaluator(short_tmp: Path, registry: Registry, certs: Certs) -> Iterator[RunningEvaluator]:
    running = serve(
        EvaluatorConfig(short_tmp / "state", None, task_id=TASK_ID, run_id="run-relay", workers=1),
        agent_listen="127.0.0.1:0",
        harness_listen="127.0.0.1:0",
        registry=registry,
        tls=ServerTls.from_files(certs.server_cert, certs.server_key, client_ca=certs.ca),
    )
    yield running
    running.stop(grace=0.2)


def _dead_port() -> Upstream:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return ("127.0.0.1", s.getsockname()[1])


def _upstream(address: str) -> Upstream:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def test_relay_carries_calls_and_streams_to_the_first_live_replica(
    mtls_evaluator: RunningEvaluator, certs: Certs, short_tmp: Path
) -> None:
    tls = ClientTls.from_files(certs.ca, certs.client_cert, certs.client_key)
    dead = _dead_port()
    live = _upstream(mtls_evaluator.agent_address)
    with EvaluatorRelay(short_tmp / "r.sock", [dead, live], tls.ssl_context()) as relay:
        # the agent's side: plaintext gRPC on a Unix socket, as in a sandbox
        with AleClient(relay.address, mtls_evaluator.agent_token, task_id=TASK_ID) as client:
            assert client.get_spec().task.id == TASK_ID
        with grpc.insecure_channel(relay.address) as channel:  # a bidirectional stream
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            asks = [reflection_pb2.ServerReflectionRequest(list_services="")] * 3
            answers = list(stub.ServerReflectionInfo(iter(asks), timeout=10))
        assert len(answers) == 3
        names = {s.name for s in answers[0].list_services_response.service}
        assert "ale_robotics.v1.AleEnv" in names
        assert relay.refused[0] >= 1 and relay.connections[0] == 0  # the dead one, tried first
        assert relay.connections[1] >= 2
    assert not (short_tmp / "r.sock").exists()


def test_relay_without_the_client_certificate_gets_nothing_through(
    mtls_evaluator: RunningEvaluator, certs: Certs, short_tmp: Path, tmp_path: Path
) -> None:
    other = make_certs(tmp_path / "other")
    live = _upstream(mtls_evaluator.agent_address)
    for tls in (
        ClientTls.from_files(certs.ca),  # no client certificate
        ClientTls.from_files(other.ca, certs.client_cert, certs.client_key),  # server not trusted
    ):
        with EvaluatorRelay(short_tmp / "r.sock", [live], tls.ssl_context()) as relay:
            client = AleClient(relay.address, mtls_evaluator.agent_token, timeout_s=3)
            with client, pytest.raises(UnavailableError):
                client.get_spec()
            # no certificate: the handshake may complete and the server then hang up; either
            # way no call went through, and a wrong CA is refused at the handshake
            assert relay.connections[0] == 0 or tls.cert_file is None


def test_relay_with_no_live_replica_refuses_the_connection(short_tmp: Path) -> None:
    with EvaluatorRelay(short_tmp / "r.sock", [_dead_port(), _dead_port()], None) as relay:
        client = AleClient(relay.address, "t", timeout_s=3)
        with client, pytest.raises(UnavailableError):
            client.get_spec()
        assert relay.refused[0] >= 1 and relay.refused[1] >= 1
