"""A sandboxed run on a separate `evaluator serve` over mutual TLS: real processes, real sockets.

The evaluator listens on 127.0.0.2 (TLS, client certificates required); the harness runs
``ale-robotics run --sandbox bwrap --evaluator DEAD,LIVE``: the agent reaches the
evaluator through the relay socket bound into its sandbox, the first (dead) replica
costing only a reconnect, and the run ends with a scored result.json. The certificates
are made by ``openssl`` as docs/remote-evaluator.md says. Without the harness token or
its CA, the same run is refused before its run directory exists.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_support import DOCKER, agent_cmd, sandbox_args
from tls_helpers import Certs, make_certs

from ale_robotics.sandboxes.bwrap.command import sandbox_available

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"
HOST = "127.0.0.2"
needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

AGENT = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient

c = AleClient.from_env()
print("ENDPOINT", c.endpoint)
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
     for r in c.get_spec().contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
print("STATE", c.wait(c.submit()).state)
"""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _wait_listening(host: str, port: int, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"evaluator did not listen on {host}:{port}")


class Served:
    def __init__(self, state: Path, certs: Certs, agent_port: int, harness_port: int) -> None:
        self.state, self.certs = state, certs
        self.agent = f"{HOST}:{agent_port}"
        self.harness = f"{HOST}:{harness_port}"


@pytest.fixture
def served(short_tmp: Path, tmp_path: Path) -> Iterator[Served]:
    certs = make_certs(tmp_path / "certs")
    state = short_tmp / "state"
    agent_port, harness_port = _free_port(HOST), _free_port(HOST)
    proc = subprocess.Popen(
        [*CLI, "evaluator", "serve", "--state-dir", str(state), "--workers", "1",
         "--agent-listen", f"{HOST}:{agent_port}", "--harness-listen", f"{HOST}:{harness_port}",
         "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key),
         "--tls-client-ca", str(certs.ca), "--videos", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_listening(HOST, harness_port, proc, 120)
        _wait_listening(HOST, agent_port, proc, 30)
        yield Served(state, certs, agent_port, harness_port)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _run(served: Served, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", TASK, *extra],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "ALE_VIDEOS": "0"},
    )  # fmt: skip


def _tls_args(served: Served) -> list[str]:
    c = served.certs
    return ["--tls-ca", str(c.ca), "--tls-client-cert", str(c.client_cert),
            "--tls-client-key", str(c.client_key)]  # fmt: skip


@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), DOCKER])
def test_sandboxed_run_on_a_remote_evaluator_over_mutual_tls(
    served: Served, short_tmp: Path, sandbox: str
) -> None:
    agent = short_tmp / "agent.py"
    agent.write_text(textwrap.dedent(AGENT))
    dead = f"{HOST}:{_free_port(HOST)}"  # a replica that is down: tried first, every time
    proc = _run(
        served, short_tmp,
        "--agent", agent_cmd(sandbox, agent), *sandbox_args(sandbox),
        "--evaluator", f"{dead},{served.agent}", "--evaluator-harness", served.harness,
        "--harness-token-file", str(served.state / "harness.token"), *_tls_args(served),
        "--run-dir", str(short_tmp / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["sandbox"] == sandbox
    assert result["state"] == "completed" and result["job_state"] == "SUCCEEDED", result
    assert isinstance(result["score"]["score"], float), result
    log = (short_tmp / "run" / "agent.log").read_text()
    assert "STATE SUCCEEDED" in log, log
    assert "ENDPOINT unix://" in log  # the relay socket, never the TCP address


@needs_bwrap
def test_a_remote_run_without_its_token_or_ca_is_refused_before_its_run_dir(
    served: Served, short_tmp: Path
) -> None:
    agent = f"{sys.executable} -c pass"
    run_dir = short_tmp / "refused"
    token = ["--harness-token-file", str(served.state / "harness.token")]
    where = ["--evaluator", served.agent, "--evaluator-harness", served.harness]
    cases = [
        (["--evaluator", served.agent], "give --evaluator-harness HOST:PORT"),
        ([*where, "--harness-token-file", str(short_tmp / "none")], "cannot read it"),
        ([*where, *token, "--tls-client-cert", str(served.certs.client_cert)], "go with"),
        (["--tls-ca", str(served.certs.ca)], "goes with --evaluator HOST:PORT"),
        (["--evaluator", "10.1.2.3:1", "--evaluator-harness", "10.1.2.3:2", *token],
         "give --tls-ca FILE"),
    ]  # fmt: skip
    for extra, message in cases:
        proc = _run(served, short_tmp, "--agent", agent, "--run-dir", str(run_dir), *extra)
        assert proc.returncode == 2, (extra, proc.stderr)
        assert message in " ".join(proc.stderr.split()), (extra, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert not run_dir.exists(), extra
