"""``deploy/compose.yaml``: a shared evaluator container serving a run for a harness on the host.

The operator's recipe from the README, for real: compose brings the evaluator up on
host directories (state, agent socket, submission volume), ``ale-robotics run``
reaches its agent channel through the socket and its harness channel through
``docker exec`` (``docker-exec://CONTAINER/tmp/ale/harness.sock``), the agent runs in
its own container, and the score is the one the embedded evaluator gives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_support import AGENT_IMAGE, EVALUATOR_IMAGE, REQUIRED, need_docker

CLI = [sys.executable, "-m", "ale_robotics"]
REPO = Path(__file__).resolve().parents[3]
COMPOSE_FILE = REPO / "deploy" / "compose.yaml"


def _compose_cmd() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


@pytest.fixture
def compose_evaluator(short_tmp: Path) -> Iterator[tuple[Path, str]]:
    need_docker()
    compose = _compose_cmd()
    if compose is None:
        if REQUIRED:
            pytest.fail("ALE_REQUIRE_DOCKER=1, but neither docker-compose nor 'docker compose'")
        pytest.skip("no docker-compose ('make docker-deps' installs Debian's)")
    home = short_tmp / "ale"
    for sub, mode in (("", 0o700), ("state", 0o700), ("agent", 0o711), ("submissions", 0o755)):
        (home / sub).mkdir(mode=mode, exist_ok=True)
    name = f"ale-evaluator-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "ALE_HOME": str(home),
        "ALE_EVALUATOR_NAME": name,
        "ALE_EVALUATOR_IMAGE": EVALUATOR_IMAGE,
    }
    cmd = [*compose, "-f", str(COMPOSE_FILE), "-p", name]
    up = subprocess.run([*cmd, "up", "-d"], env=env, capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr
        deadline = time.monotonic() + 120
        while True:  # serving once the loopback client reaches the harness socket
            probe = subprocess.run(
                ["docker", "exec", name, "python", "-m", "ale_robotics.harness.loopback",
                 "unix:///tmp/ale/harness.sock"],
                capture_output=True, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if probe.returncode == 0 and (home / "agent" / "agent.sock").is_socket():
                break
            assert time.monotonic() < deadline, probe.stderr
            time.sleep(0.3)
        yield home, name
    finally:
        subprocess.run([*cmd, "down", "--timeout", "20"], env=env, capture_output=True)


def test_compose_serves_a_run_for_a_harness_on_the_host(
    compose_evaluator: tuple[Path, str],
) -> None:
    home, name = compose_evaluator
    proc = subprocess.run(
        [*CLI, "run", "td3-inverted-pendulum-v1", "--sandbox", "docker", "--agent-image",
         AGENT_IMAGE, "--evaluator", f"unix://{home}/agent/agent.sock",
         "--evaluator-harness", f"docker-exec://{name}/tmp/ale/harness.sock",
         "--harness-token-file", str(home / "state" / "harness.token"),
         "--submission-dir", str(home / "submissions"),
         "--run-dir", str(home.parent / "run"),
         "--agent", "python examples/agents/submit_checkpoint.py"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("score: 1.0"), line
    doc = json.loads((home.parent / "run" / "result.json").read_text())
    assert doc["job_state"] == "SUCCEEDED" and doc["sandbox"] == "docker"
    assert doc["eval_result"]["read_on_harness_channel"] and doc["eval_result"]["official"]
    # The run's own directory of the shared volume holds what the agent submitted.
    (run_sub,) = (home / "submissions").iterdir()
    assert run_sub.name == doc["run_id"] and (run_sub / "policy.safetensors").exists()
