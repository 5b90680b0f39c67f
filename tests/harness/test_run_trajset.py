"""The replay task end to end: the scripted reference agent through `ale-robotics run`.

A real harness, an embedded evaluator on Unix sockets and worker processes replaying the hidden
subset in MuJoCo; about 20 s for the successful run on two cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ale_robotics.rollouts.replay import select_subset
from ale_robotics.scoring.report import fmt_number
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import default_registry
from ale_robotics.trajectory import verify_file

TASK_ID = "fetch-pickplace-trajset-v1"
AGENT = Path(__file__).resolve().parents[2] / "examples" / "agents" / "fetch_scripted.py"

WRONG_SEEDS_AGENT = """
import numpy as np
from ale_robotics.client import AleClient
c = AleClient.from_env()
task = c.get_spec().task
n, t = len(task.eval.base_seeds), task.env.max_episode_steps
seeds = np.arange(n, dtype=np.int64)  # not the published instances
np.savez(c.submission_dir / "trajectories.npz", seeds=seeds, actions=np.zeros((n, t, 4), "f4"))
print("job state:", c.wait(c.submit()).state)
"""


def _run(
    tmp: Path, agent_cmd: str, workspace: Path = AGENT.parents[2]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            TASK_ID,
            "--agent",
            agent_cmd,
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--workers",
            "2",
            "--workspace",  # the agent sees only its workspace (the repo for the example)
            str(workspace),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads((tmp / "run" / "result.json").read_text())


def _events(run: Path) -> dict[str, dict[str, Any]]:
    lines = (run / "trajectory.jsonl").read_text().splitlines()
    return {e["kind"]: e["payload"] for e in map(json.loads, lines)}


def test_scripted_agent_solves_the_hidden_subset(short_tmp: Path) -> None:
    proc, doc = _run(short_tmp, f"{sys.executable} {AGENT}")
    run = short_tmp / "run"
    # the floor: all-zero actions on the same hidden instances solve few of them (an instance
    # whose goal is within 5 cm of the object's start is solved by doing nothing)
    floor = doc["eval_result"]["floor"]["metrics"]["success_rate"]
    assert 0.0 <= floor <= 0.2 and doc["score"]["floor"] == floor
    assert proc.stdout.strip().splitlines()[-1] == (
        f"score: unscored: target not synced (success_rate 1.0) [floor {fmt_number(floor)}]"
    )
    assert doc["job_state"] == "SUCCEEDED"
    assert doc["score"]["status"] == "unscored" and doc["score"]["score"] is None
    result = doc["eval_result"]
    assert result["metrics"]["success_rate"] == 1.0
    assert result["metrics"]["mean_final_distance"] < 0.05
    assert result["simulator_versions"]["gymnasium-robotics"] == "1.4.2"
    agent_log = (run / "agent.log").read_text()
    assert "local success 40/40" in agent_log
    assert "SUCCEEDED (20/20 episodes)" in agent_log

    # the replayed instances are the documented subset: the 20 smallest hidden values
    task = default_registry().get(TASK_ID)
    secret = (short_tmp / "state" / "secret").read_bytes()
    hidden = derive_seeds(task.eval.base_seeds, result["run_id"], secret)
    indices = [e["index"] for e in result["episodes"]]
    assert indices == [i for i, _ in select_subset(task, hidden)]
    assert len(indices) == 20 and all(e["length"] == 50 for e in result["episodes"])

    # every instance is committed to in the trajectory; the episodes name theirs
    rep = verify_file(run / "trajectory.jsonl", expected_head=doc["trajectory_head"])
    assert rep.ok, rep.reason
    events = _events(run)
    commitments = events["seed_commitment"]["seed_commitments"]
    assert commitments == [h.commitment for h in hidden]
    assert [e["seed_commitment"] for e in result["episodes"]] == [commitments[i] for i in indices]
    assert events["evaluation_started"]["episodes"] == 20
    assert events["progress_summary"]["episodes_total"] == 20


def test_trajectories_for_other_instances_are_rejected(short_tmp: Path) -> None:
    agent = short_tmp / "agent.py"
    agent.write_text(textwrap.dedent(WRONG_SEEDS_AGENT))
    _, doc = _run(short_tmp, f"{sys.executable} {agent}", workspace=short_tmp)
    assert doc["job_state"] == "REJECTED"
    reason = doc["eval_result"]["failure_reason"]
    assert reason.startswith("trajectories.npz: key 'seeds' differs from the published instances")
    assert reason.endswith("(rule: published instances)")
    assert "job state: REJECTED" in (short_tmp / "run" / "agent.log").read_text()
    assert doc["eval_result"]["metrics"] == {}
