"""The Isaac Lab task end to end, in bwrap: the shipped checkpoint, and training in the sandbox.

``ale-robotics run isaaclab-cartpole-direct-v1`` with the demo's agent and the shipped RSL-RL
checkpoint: the embedded evaluator runs Isaac Lab's env in the ``isaaclab`` engine's worker
on hidden seeds (offline: a worker that tried the network fails the job, so a passing run
is one that tried nothing), the result and the signed ``result`` event name the engine, and
``audit`` re-runs the job and finds every episode identical. Then the reference agent
trains with RSL-RL inside the sandbox (the engine shown read-only, ``ALE_ENGINE_PYTHON``) on
the CPU and its checkpoint scores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_support import audit_ok, need_engine

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "isaaclab-cartpole-direct-v1"
SHIPPED = "examples/agents/checkpoints/isaaclab-cartpole-direct-v1/model.pt"


def _run(tmp_path: Path, agent: str) -> tuple[Path, Path, dict[str, str]]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg")}
    run_dir, state = tmp_path / "run", tmp_path / "state"
    where = ["--state-dir", str(state), "--workers", "1", "--sandbox", "bwrap"]
    run = subprocess.run(
        [*CLI, "run", TASK, "--agent", agent, "--run-dir", str(run_dir), *where],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,  # the workspace the sandbox shows: the repository, as for the demo
        check=False,
    )
    log = run_dir / "agent.log"
    shown = log.read_text()[-3000:] if log.exists() else ""
    assert run.returncode == 0, run.stderr[-3000:] + shown
    return run_dir, state, env


def _result(run_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return report


@pytest.mark.slow
@pytest.mark.timeout(2400)  # a run and its audit (or a training) on a loaded host
def test_the_shipped_checkpoint_scores_and_audit_reproduces_it(tmp_path: Path) -> None:
    need_engine("isaaclab")
    agent = f"{sys.executable} examples/agents/submit_checkpoint.py --checkpoint {SHIPPED}"
    run_dir, state, env = _run(tmp_path, agent)
    report = _result(run_dir)
    result = report["eval_result"]
    # The hidden seeds are new every run, and the shipped policy loses the cart off its rail
    # from a few starts (measured: 1 of 16 episodes in one run, 47 steps): most episodes last
    # the whole 300 steps, and the mean stays far above doing nothing (about -21 here).
    lengths = sorted(e["length"] for e in result["episodes"])
    assert lengths[len(lengths) // 2] == 300, lengths
    assert result["metrics"]["mean_return"] > 3.0, result["metrics"]  # of at most about 5
    assert result["metrics"]["mean_return"] > result["floor"]["metrics"]["mean_return"] + 20
    assert report["score"]["status"] == "unscored"  # measurement-only: no target
    engine = result["engine"]
    assert engine["name"] == "isaaclab" and engine["device"] == "cpu"
    assert engine["versions"]["isaaclab"] == "3.0.0" and engine["python"].startswith("3.12")
    signed = [
        json.loads(line)
        for line in (run_dir / "trajectory.jsonl").read_text().splitlines()
        if '"kind":"result"' in line.replace(" ", "")
    ]
    assert signed and signed[-1]["payload"]["engine"] == engine

    audit_ok(run_dir, state / "secret", env, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(2400)  # a run and its audit (or a training) on a loaded host
def test_the_reference_agent_trains_with_rsl_rl_in_the_sandbox(tmp_path: Path) -> None:
    need_engine("isaaclab")
    agent = f"{sys.executable} examples/agents/isaaclab_rsl_rl.py"
    run_dir, _, _ = _run(tmp_path, agent)
    log = (run_dir / "agent.log").read_text()
    assert "trained in" in log and "ALE_ENGINE_PYTHON" not in log  # it trained, found it
    result = _result(run_dir)["eval_result"]
    # As for the shipped checkpoint, new hidden seeds lose the cart from a start now and then
    # (CI: a mean length of 284.3 of 300, return 4.65): most episodes last the whole 300 steps
    # and the return stays far above doing nothing.
    lengths = sorted(e["length"] for e in result["episodes"])
    assert lengths[len(lengths) // 2] == 300, lengths
    assert result["metrics"]["mean_return"] > result["floor"]["metrics"]["mean_return"] + 20
