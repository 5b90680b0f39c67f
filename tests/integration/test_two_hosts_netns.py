"""docs/remote-evaluator.md's two-host recipe, with the two hosts as network namespaces.

The test makes two network namespaces joined by a veth pair (10.231.7.1 for the
evaluator host, 10.231.7.2 for the harness host; the addresses exist only inside the
namespaces the test made, and go when it deletes them). In the first, ``evaluator
serve`` refuses a plaintext listener on its address without ``--insecure``, then serves
mutual TLS with certificates made by the recipe's ``openssl`` commands; in the second,
``ale-robotics run --sandbox bwrap --evaluator 10.231.7.1:P`` reaches it with only the CA,
a client certificate and the harness token, and the run is scored. The harness host
cannot reach the evaluator host's loopback, and the agent (in bwrap, without network)
reaches the evaluator only through the harness's relay socket.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tls_helpers import make_certs

from ale_robotics.sandboxes.bwrap.command import sandbox_available

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"
EVALUATOR_IP = "10.231.7.1"
HARNESS_IP = "10.231.7.2"
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


@dataclass(frozen=True)
class Hosts:
    evaluator: str
    harness: str

    def run(self, ns: str, *cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", ns, *cmd], text=True, **kw)

    def popen(self, ns: str, *cmd: str, **kw: object) -> subprocess.Popen[str]:
        return subprocess.Popen(["ip", "netns", "exec", ns, *cmd], text=True, **kw)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2 (ip)")
    if not sandbox_available():
        pytest.skip("bubblewrap cannot start here (make sandbox-deps)")
    tag = secrets.token_hex(3)
    made: list[str] = []
    try:
        for role in ("ev", "h"):
            ns = f"ale-{role}-{tag}"
            try:
                _ip("netns", "add", ns)
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"cannot make a network namespace here: {exc.stderr!r}")
            made.append(ns)
        ev, hs = made
        a, b = f"ale-e{tag}", f"ale-h{tag}"  # interface names: 15 bytes at most
        _ip("link", "add", a, "netns", ev, "type", "veth", "peer", "name", b, "netns", hs)
        for ns, dev, addr in ((ev, a, EVALUATOR_IP), (hs, b, HARNESS_IP)):
            _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", dev, "up")
        yield Hosts(evaluator=ev, harness=hs)
    finally:
        for ns in made:  # the veth pair goes with its namespaces
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _reachable(hosts: Hosts, port: int) -> bool:
    probe = (
        "import socket,sys\n"
        f"try: socket.create_connection(({EVALUATOR_IP!r}, {port}), 1).close()\n"
        "except OSError: sys.exit(1)\n"
    )
    return hosts.run(hosts.harness, sys.executable, "-c", probe, timeout=30).returncode == 0


def test_the_two_host_recipe_across_network_namespaces(
    hosts: Hosts, short_tmp: Path, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs", san=f"IP:{EVALUATOR_IP}")
    state = short_tmp / "state"
    agent_at, harness_at = f"{EVALUATOR_IP}:7001", f"{EVALUATOR_IP}:7002"
    serve = [
        *CLI, "evaluator", "serve", "--state-dir", str(state), "--workers", "1",
        "--agent-listen", agent_at, "--harness-listen", harness_at, "--videos", "0",
    ]  # fmt: skip

    plain = hosts.run(hosts.evaluator, *serve, capture_output=True, timeout=120)
    assert plain.returncode == 2, plain.stderr
    assert "--insecure" in plain.stderr and "Traceback" not in plain.stderr

    tls = ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key),
           "--tls-client-ca", str(certs.ca)]  # fmt: skip
    proc = hosts.popen(
        hosts.evaluator, *serve, *tls, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while not _reachable(hosts, 7002):
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not listen"
            time.sleep(0.3)
        agent = short_tmp / "agent.py"
        agent.write_text(textwrap.dedent(AGENT))
        run = hosts.run(
            hosts.harness, *CLI, "run", TASK, "--agent", f"{sys.executable} {agent}",
            "--sandbox", "bwrap", "--evaluator", agent_at, "--evaluator-harness", harness_at,
            "--harness-token-file", str(state / "harness.token"), "--tls-ca", str(certs.ca),
            "--tls-client-cert", str(certs.client_cert),
            "--tls-client-key", str(certs.client_key), "--run-dir", str(short_tmp / "run"),
            capture_output=True, timeout=300, cwd=short_tmp,
            env={**os.environ, "ALE_VIDEOS": "0"},
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        result = json.loads((short_tmp / "run" / "result.json").read_text())
        assert result["state"] == "completed" and result["job_state"] == "SUCCEEDED", result
        log = (short_tmp / "run" / "agent.log").read_text()
        assert "STATE SUCCEEDED" in log and "ENDPOINT unix://" in log, log
    finally:
        proc.terminate()
        proc.wait(timeout=60)
