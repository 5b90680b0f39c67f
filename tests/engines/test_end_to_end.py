"""A MuJoCo Warp task end to end: ``ale-robotics run`` in the sandbox, then ``audit`` re-runs it.

The demo's agent submits the shipped TD3 checkpoint to ``td3-inverted-pendulum-warp-v1``; the
embedded evaluator evaluates it on hidden seeds in the ``mujoco-warp`` engine's worker; the
result and its signed ``result`` event name the engine and device; the run's summary ranks
on that engine's board; ``audit`` re-runs the job (the same engine, on the local executor)
and finds every episode identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import audit_ok, need_engine

from ale_robotics.runs import load_summary
from ale_robotics.runs.leaderboard import board

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-warp-v1"


@pytest.mark.slow
def test_run_scores_names_the_engine_and_audit_reproduces_it(tmp_path: Path) -> None:
    need_engine("mujoco-warp")
    agent = f"{sys.executable} examples/agents/submit_checkpoint.py"  # as `make demo` says it
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    run_dir, state = tmp_path / "run", tmp_path / "state"
    where = ["--state-dir", str(state), "--workers", "1"]
    run = subprocess.run(
        [*CLI, "run", TASK, "--agent", agent, "--run-dir", str(run_dir), *where],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,  # the workspace the sandbox shows: the repository, as for the demo
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((run_dir / "result.json").read_text())
    result = report["eval_result"]
    assert result["metrics"]["mean_return"] == 1000.0 and report["score"]["score"] > 1.0
    assert result["engine"]["name"] == "mujoco-warp" and result["engine"]["device"] == "cpu"
    assert result["engine"]["versions"]["mujoco-warp"] == "4.0.0"
    signed = [
        json.loads(line)
        for line in (run_dir / "trajectory.jsonl").read_text().splitlines()
        if '"kind":"result"' in line.replace(" ", "")
    ]
    assert signed and signed[-1]["payload"]["engine"] == result["engine"]
    summary = load_summary(run_dir)
    assert summary.engine == "mujoco-warp/cpu" and summary.ranked
    assert board(summary) == f"{TASK} on mujoco-warp/cpu"

    audit_ok(run_dir, state / "secret", env, tmp_path)
