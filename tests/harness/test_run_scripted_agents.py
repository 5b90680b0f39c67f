"""The scripted reference agents run their tasks end to end through `ale-robotics run`,
as smoke runs of 2 episodes (a few seconds each), labelled as such everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples/agents/scripted_interactive.py"
CLI = [sys.executable, "-m", "ale_robotics"]
TASKS = [
    "td3-hopper-v1",
    "td3-reacher-v1",
    "tdmpc2-cheetah-run-v1",
    "tdmpc2-walker-run-v1",
    "tdmpc2-mw-push-v1",
]


@pytest.mark.parametrize("task_id", TASKS)
def test_reference_agent_smoke_run(short_tmp: Path, task_id: str) -> None:
    run = short_tmp / "run"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            task_id,
            "--agent",
            f"{sys.executable} {AGENT}",
            "--episodes",
            "2",
            "--run-dir",
            str(run),
            "--state-dir",
            str(short_tmp / "state"),
            "--workspace",  # the example lives in the repository
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("score: ") and last.endswith(
        "[smoke run: 2 of 10 episodes, not official]"
    )
    report = json.loads((run / "result.json").read_text())
    assert report["job_state"] == "SUCCEEDED", (run / "agent.log").read_text()
    assert report["smoke_run"] == report["eval_result"]["smoke_run"] == {"episodes": 2, "of": 10}
    assert report["score"]["explanation"].startswith("This is a smoke run of 2 of 10 episodes")
    assert report["score"]["status"] == "scored" and report["score"]["score"] > 0
    episodes = report["eval_result"]["episodes"]
    assert len(episodes) == 2 and not any(e["abandoned"] for e in episodes)
    has_success = task_id == "tdmpc2-mw-push-v1"
    assert all((e["success"] is not None) == has_success for e in episodes)
    if task_id == "td3-reacher-v1":  # the cost is minus the return
        metrics = report["eval_result"]["metrics"]
        assert metrics["mean_cost"] == -metrics["mean_return"] > 0
