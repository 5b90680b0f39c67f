"""``ale-robotics run --sandbox docker`` end to end, with real containers (issue 20).

The shipped TD3 checkpoint scores the same in the agent container as in bubblewrap,
with the evaluator embedded and with the evaluator in a container of its own whose
harness channel is read through ``docker exec`` of the loopback client; nothing of
either container is left once the run is over.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from docker_support import (
    AGENT_IMAGE,
    EVALUATOR_IMAGE,
    need_docker,
    run_containers,
    sandbox_args,
)

from ale_robotics.sandboxes.bwrap.command import sandbox_available

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"
CHECKPOINT_AGENT = "python examples/agents/submit_checkpoint.py"
REPO = Path(__file__).resolve().parents[3]


def _run(tmp: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_dir = tmp / name
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", CHECKPOINT_AGENT, "--run-dir", str(run_dir),
         "--state-dir", str(tmp / "state"), *args],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, run_dir


def _score_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The score line up to its floor, which each run measures on its own hidden seeds."""
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("score: ") and " [floor " in line, proc.stdout
    return line.split(" [floor ")[0]


@pytest.fixture(scope="module")
def reference_line(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What the same command prints under bubblewrap (or unsandboxed where it cannot start)."""
    need_docker()
    tmp = tmp_path_factory.mktemp("ref")
    sandbox = "bwrap" if sandbox_available() else "none"
    proc, _ = _run(tmp, "ref", "--sandbox", sandbox)
    return _score_line(proc)


def test_the_checkpoint_scores_the_same_in_the_agent_container(
    short_tmp: Path, reference_line: str
) -> None:
    proc, run_dir = _run(short_tmp, "run", *sandbox_args("docker"))
    assert _score_line(proc) == reference_line
    # the shipped checkpoint balances every episode: 1000 / the paper's 982.02
    assert reference_line.startswith(
        "score: 1.018 [95% 1.018-1.018] (mean_return 1000.0 / paper 982.02)"
    )
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["sandbox"] == "docker" and doc["job_state"] == "SUCCEEDED"
    assert doc["agent_cgroup"] == "docker" and doc["agent_cgroup_warning"] is None
    assert doc["agent_cpu_s"] > 0 and doc["agent_peak_memory_bytes"] > 0
    log = (run_dir / "agent.log").read_text()
    assert "staged as /submission/policy.safetensors" in log  # the container's view
    launched = next(
        json.loads(line)
        for line in (run_dir / "trajectory.jsonl").read_text().splitlines()
        if '"agent_launched"' in line
    )
    assert launched["payload"]["image"] == AGENT_IMAGE
    assert launched["payload"]["image_id"].startswith("sha256:")
    assert run_containers(doc["run_id"]) == []


def test_an_evaluator_container_reads_the_same_result_through_docker_exec(
    short_tmp: Path, reference_line: str
) -> None:
    proc, run_dir = _run(
        short_tmp, "run", *sandbox_args("docker"), "--evaluator-image", EVALUATOR_IMAGE
    )
    assert _score_line(proc) == reference_line
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["eval_result"]["read_on_harness_channel"] is True
    assert doc["eval_result"]["official"] is True
    evaluator_log = (run_dir / "evaluator.log").read_text()
    assert "harness channel: unix:///tmp/ale/harness.sock" in evaluator_log  # inside only
    assert "evaluator stopped" in evaluator_log
    # Signed by the key of the state dir the container was given, as an embedded one's.
    key = subprocess.run(
        [*CLI, "evaluator", "public-key", "--state-dir", str(short_tmp / "state")],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    verify = subprocess.run(
        [*CLI, "trajectory", "verify", str(run_dir / "trajectory.jsonl"), "--public-key", key],
        capture_output=True, text=True,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert run_containers(doc["run_id"]) == []


def test_a_bwrap_agent_can_use_an_evaluator_container(short_tmp: Path, reference_line: str) -> None:
    """The evaluator image does not need the docker sandbox: it shares the agent socket's
    directory with whatever sandbox the agent has."""
    if not sandbox_available():
        pytest.skip("bubblewrap cannot start here")
    proc, run_dir = _run(
        short_tmp, "run", "--sandbox", "bwrap", "--evaluator-image", EVALUATOR_IMAGE
    )
    assert _score_line(proc) == reference_line
    assert json.loads((run_dir / "result.json").read_text())["sandbox"] == "bwrap"
