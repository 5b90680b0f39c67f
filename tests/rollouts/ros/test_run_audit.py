"""``td3-hopper-ros-v1`` end to end: ``ale-robotics run`` in bwrap, then ``audit`` re-runs it.

The reference agent (``examples/agents/ros_controller.py``) submits the shipped TD3 Hopper
actor from the sandbox; the embedded evaluator runs each hidden-seed episode as a ROS 1
graph in the ``ros`` engine's worker; the result and its signed ``result`` event name the
engine (ROS 1 and MuJoCo versions) and carry the control loop's outcomes; ``audit``
re-runs the job with the signed hold schedules and finds every episode identical, the
timing re-measured. A smoke run of 3 episodes (the same hidden seeds as the official
run's first three), to keep the test's graphs few.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import ros_support
from engine_support import audit_ok

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "ale_robotics"]

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_the_reference_agent_scores_in_bwrap_and_audit_reproduces_it(tmp_path: Path) -> None:
    agent = f"{sys.executable} examples/agents/ros_controller.py"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    run_dir, state = tmp_path / "run", tmp_path / "state"
    run = subprocess.run(
        [
            *CLI,
            "run",
            ros_support.TASK,
            "--agent",
            agent,
            "--sandbox",
            "bwrap",
            "--episodes",
            "3",
            "--run-dir",
            str(run_dir),
            "--state-dir",
            str(state),
            "--workers",
            "1",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,  # the workspace the sandbox shows: the repository
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    report = json.loads((run_dir / "result.json").read_text())
    assert report["job_state"] == "SUCCEEDED", report["eval_result"]
    result = report["eval_result"]
    engine = result["engine"]
    assert engine["name"] == "ros"
    assert engine["versions"]["mujoco"] == "3.3.0"
    assert engine["versions"]["python3-rospy"].startswith("1.15.")
    assert result["outcomes"]["backend"] == "ros" and len(result["outcomes"]["episodes"]) == 3
    for name in ("held_command_rate", "command_latency_p99_ms", "graph_start_s"):
        assert name in result["metrics"]
    assert result["metrics"]["mean_return"] > 0 and report["score"]["score"] > 0
    signed = [
        json.loads(line)
        for line in (run_dir / "trajectory.jsonl").read_text().splitlines()
        if '"kind":"result"' in line.replace(" ", "")
    ]
    assert signed and signed[-1]["payload"]["engine"] == engine
    assert signed[-1]["payload"]["outcomes"] == result["outcomes"]

    doc = audit_ok(run_dir, state / "secret", env, tmp_path)
    checks = {c["name"]: c for c in doc["checks"]}
    assert "re-measured on this host" in checks["timed metrics"]["detail"]
    assert "match" in checks["re-run outcomes"]["detail"]
