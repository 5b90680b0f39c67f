"""TLS on the evaluator's TCP listeners: real gRPC over real loopback sockets, real certificates.

Certificates come from ``openssl`` (tests/tls_helpers.py, the commands of
docs/remote-evaluator.md). What a client without TLS, without a client certificate or
with another CA gets is a failed call, never an answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tls_helpers import Certs, make_certs
from typer.testing import CliRunner

from ale_robotics.addresses import is_loopback, split_host_port
from ale_robotics.cli.main import app
from ale_robotics.client.sdk import AleClient
from ale_robotics.client.tls import ClientTls
from ale_robotics.errors import InvalidArgumentError, UnavailableError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.server.tls import ServerTls, check_listener
from ale_robotics.tasks import Registry

TASK_ID = "td3-inverted-pendulum-v1"
RUN = "run-tls-1"


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


def _serve(short_tmp: Path, registry: Registry, tls: ServerTls) -> RunningEvaluator:
    return serve(
        EvaluatorConfig(short_tmp / "state", None, task_id=TASK_ID, run_id=RUN, workers=1),
        agent_listen="127.0.0.1:0",
        harness_listen="127.0.0.1:0",
        registry=registry,
        tls=tls,
    )


@pytest.fixture
def tls_evaluator(short_tmp: Path, registry: Registry, certs: Certs) -> Iterator[RunningEvaluator]:
    running = _serve(short_tmp, registry, ServerTls.from_files(certs.server_cert, certs.server_key))
    yield running
    running.stop(grace=0.2)


@pytest.fixture
def mtls_evaluator(short_tmp: Path, registry: Registry, certs: Certs) -> Iterator[RunningEvaluator]:
    tls = ServerTls.from_files(certs.server_cert, certs.server_key, client_ca=certs.ca)
    running = _serve(short_tmp, registry, tls)
    yield running
    running.stop(grace=0.2)


def _client(running: RunningEvaluator, tls: ClientTls | None) -> AleClient:
    return AleClient(
        running.agent_address,
        running.agent_token,
        task_id=TASK_ID,
        timeout_s=3.0,
        credentials=tls.credentials() if tls is not None else None,
    )


def test_tls_listener_answers_a_client_with_the_ca(
    tls_evaluator: RunningEvaluator, certs: Certs
) -> None:
    with _client(tls_evaluator, ClientTls.from_files(certs.ca)) as client:
        assert client.get_spec().task.id == TASK_ID
    # health (what load balancers ask) works through TLS too
    channel = grpc.secure_channel(
        tls_evaluator.harness_address, grpc.ssl_channel_credentials(certs.ca.read_bytes())
    )
    with channel:
        r = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_plaintext_client_to_a_tls_port_gets_no_answer(tls_evaluator: RunningEvaluator) -> None:
    with _client(tls_evaluator, None) as client, pytest.raises(UnavailableError):
        client.get_spec()


def test_a_client_trusting_another_ca_refuses_the_server(
    tls_evaluator: RunningEvaluator, tmp_path: Path
) -> None:
    other = make_certs(tmp_path / "other")
    client = _client(tls_evaluator, ClientTls.from_files(other.ca))
    with client, pytest.raises(UnavailableError):
        client.get_spec()


def test_mutual_tls_refuses_a_client_without_a_certificate(
    mtls_evaluator: RunningEvaluator, certs: Certs, tmp_path: Path
) -> None:
    client = _client(mtls_evaluator, ClientTls.from_files(certs.ca))
    with client, pytest.raises(UnavailableError):
        client.get_spec()
    # a certificate another CA signed is no better
    other = make_certs(tmp_path / "other")
    foreign = ClientTls.from_files(certs.ca, other.client_cert, other.client_key)
    with _client(mtls_evaluator, foreign) as client, pytest.raises(UnavailableError):
        client.get_spec()
    signed = ClientTls.from_files(certs.ca, certs.client_cert, certs.client_key)
    with _client(mtls_evaluator, signed) as client:
        assert client.get_spec().task.id == TASK_ID


def test_a_plaintext_listener_off_loopback_is_refused_before_anything_starts(
    short_tmp: Path, registry: Registry
) -> None:
    state = short_tmp / "state"
    with pytest.raises(InvalidArgumentError, match="--tls-cert FILE --tls-key FILE"):
        serve(
            EvaluatorConfig(state, None, task_id=TASK_ID, run_id=RUN, workers=1),
            agent_listen="0.0.0.0:0",
            registry=registry,
        )
    assert not state.exists()
    check_listener("--agent-listen", "0.0.0.0:7000", None, insecure=True)  # said so
    for allowed in ("127.0.0.1:7000", "[::1]:7000", "localhost:7000", "unix:///tmp/a.sock"):
        check_listener("--agent-listen", allowed, None, insecure=False)


def test_loopback_addresses() -> None:
    assert split_host_port("[::1]:50051") == ("::1", 50051)
    assert split_host_port("unix:///tmp/x.sock") is None
    assert split_host_port("host") is None
    assert [is_loopback(a) for a in ("127.0.0.2:1", "[::1]:1", "LOCALHOST:1")] == [True] * 3
    assert not any(is_loopback(a) for a in ("0.0.0.0:1", "[::]:1", "10.0.0.1:1", "eval:1"))


def _serve_cli(state: Path, *extra: str) -> str:
    r = CliRunner().invoke(app, ["evaluator", "serve", "--state-dir", str(state), *extra])
    assert r.exit_code == 2, r.output
    return " ".join(r.output.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def test_serve_refuses_bad_tls_flags_before_making_anything(tmp_path: Path, certs: Certs) -> None:
    state = tmp_path / "state"
    cases = [
        (["--agent-listen", "0.0.0.0:7001"], "--agent-listen 0.0.0.0:7001 is a TCP address"),
        (["--harness-listen", "10.9.8.7:7001"], "pass --insecure"),
        (["--tls-cert", str(certs.server_cert)], "--tls-cert and --tls-key go together"),
        (["--tls-client-ca", str(certs.ca)], "--tls-client-ca goes with --tls-cert"),
        (
            ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.client_key)],
            "no matching PEM certificate and private key",
        ),
        (
            ["--tls-cert", str(certs.server_cert), "--tls-key", str(tmp_path / "nope.key")],
            "--tls-key",
        ),
        (
            ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)],
            "--tls-cert is for TCP listeners",
        ),
        (
            [
                "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key),
                "--tls-client-ca", str(certs.server_key), "--agent-listen", "127.0.0.1:0",
            ],
            "--tls-client-ca",
        ),
    ]  # fmt: skip
    for extra, message in cases:
        assert message in _serve_cli(state, *extra), extra
        assert not state.exists(), extra
