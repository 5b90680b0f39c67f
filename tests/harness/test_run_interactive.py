"""`ale-robotics run` on an interactive task: an agent process drives its eval session live."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ale_robotics.audit import audit_run
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.results.intervals import metric_intervals
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import default_registry
from ale_robotics.trajectory import verify_file

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-double-pendulum-v1"

# The deterministic policy, shared verbatim by the agent process and the local replay.
POLICY = """
import numpy as np

W = np.random.default_rng(0).standard_normal(9) * 0.3

def policy(obs):
    return np.tanh(np.array([(obs * W).sum()])).astype(np.float32)
"""

AGENT = """
from ale_robotics.client import RemoteEnv

practice = RemoteEnv.from_env()              # a little practice first: it must not count
obs, _ = practice.reset(seed=0)
for _ in range(30):
    obs, _, terminated, truncated, _ = practice.step(policy(obs))
    if terminated or truncated:
        obs, _ = practice.reset()
practice.close()

env = RemoteEnv.from_env(kind="eval")
episodes = 0
while not env.eval_complete and episodes < STOP_AFTER:
    obs, _ = env.reset(seed=123)             # ignored: the evaluator uses hidden seeds
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        done = terminated or truncated
    episodes += 1
print("episodes:", episodes, "complete:", env.eval_complete)
if env.eval_complete:
    env.close()
"""


def _run(tmp: Path, stop_after: int = 1000) -> tuple[subprocess.CompletedProcess[str], Path]:
    agent = tmp / "agent.py"
    agent.write_text(POLICY + AGENT.replace("STOP_AFTER", str(stop_after)))
    run_dir = tmp / "run"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            TASK,
            "--agent",
            f"{sys.executable} {agent}",
            "--run-dir",
            str(run_dir),
            "--state-dir",
            str(tmp / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
    )
    return proc, run_dir


def _replay(run_id: str, secret: bytes, played: int = 10) -> list[EpisodeOutcome]:
    """The same policy on the evaluator's hidden seeds, in plain Gymnasium; episodes from
    ``played`` on get the null action (zero), as the evaluator completes abandoned ones."""
    ns: dict[str, Any] = {}
    exec(POLICY, ns)
    task = default_registry().get(TASK)
    env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    out = []
    for s in derive_seeds(task.eval.base_seeds, run_id, secret):
        obs, _ = env.reset(seed=s.value)
        ret, length, terminated, truncated = 0.0, 0, False, False
        policy = ns["policy"] if s.index < played else lambda _: np.zeros(1, np.float32)
        while not (terminated or truncated):
            obs, r, terminated, truncated, _ = env.step(policy(obs))
            ret += float(r)
            length += 1
        out.append(EpisodeOutcome(s.index, ret, length, bool(terminated)))
    return out


def test_interactive_run_matches_a_local_replay_on_the_hidden_seeds(short_tmp: Path) -> None:
    proc, run = _run(short_tmp)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("score: ")
    assert "episodes: 10 complete: True" in (run / "agent.log").read_text()
    report = json.loads((run / "result.json").read_text())
    assert report["job_state"] == "SUCCEEDED"
    official = report["eval_result"]
    assert official["official"] is True and official["task_id"] == TASK
    assert report["score"]["measured"]["mean_return"] == official["metrics"]["mean_return"]

    secret = (short_tmp / "state" / "secret").read_bytes()
    local = _replay(report["run_id"], secret)
    assert [e["episode_return"] for e in official["episodes"]] == [o.ret for o in local]
    assert [e["length"] for e in official["episodes"]] == [o.length for o in local]
    assert official["metrics"] == summarize(local)
    # each metric's bootstrap interval over the episodes, as the evaluator's function gives it
    # from the replayed episodes, and the score at its ends on the score line
    intervals = metric_intervals(local, official["metrics"])
    assert official["intervals"] == {k: iv.model_dump() for k, iv in intervals.items()}
    iv = official["intervals"]["mean_return"]
    assert iv["low"] < official["metrics"]["mean_return"] < iv["high"]
    low, high = report["score"]["score_interval"]
    assert low <= report["score"]["score"] <= high and low < high
    assert last.startswith(f"score: {report['score']['score']:.3f} [95% {low:.3f}-{high:.3f}] (")
    audit = audit_run(run, secret)
    assert audit.ok, [c for c in audit.checks if not c.ok]

    rep = verify_file(run / "trajectory.jsonl", expected_head=report["trajectory_head"])
    assert rep.ok, rep.reason
    kinds = [json.loads(x)["kind"] for x in (run / "trajectory.jsonl").read_text().splitlines()]
    for k in ("session_opened", "progress_summary", "result", "score"):
        assert k in kinds
    assert kinds.count("episode_summary") == 10
    cli = subprocess.run(
        [*CLI, "trajectory", "verify", str(run / "trajectory.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr


def test_agent_that_quits_mid_eval_gets_the_null_action_for_the_rest(short_tmp: Path) -> None:
    """Quitting after 2 of 10 episodes: the evaluator plays the other 8 from their
    hidden-seed resets with the null action, and the run is scored on all 10."""
    proc, run = _run(short_tmp, stop_after=2)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((run / "result.json").read_text())
    assert report["job_state"] == "SUCCEEDED"
    official = report["eval_result"]
    assert [e["abandoned"] for e in official["episodes"]] == [False] * 2 + [True] * 8
    assert [e["agent_steps"] for e in official["episodes"][2:]] == [0] * 8
    secret = (short_tmp / "state" / "secret").read_bytes()
    local = _replay(report["run_id"], secret, played=2)
    assert [e["episode_return"] for e in official["episodes"]] == [o.ret for o in local]
    assert official["metrics"] == summarize(local)
    assert report["score"]["measured"] == official["metrics"]
    assert audit_run(run, secret).ok
    assert verify_file(run / "trajectory.jsonl", expected_head=report["trajectory_head"]).ok


def test_sb3_example_agent_trains_then_runs_its_eval_session(short_tmp: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples/agents/sb3_interactive.py"
    cmd = f"{sys.executable} {example} --algo ppo --timesteps 256"
    dirs = ["--run-dir", str(short_tmp / "run"), "--state-dir", str(short_tmp / "state")]
    # The example lives in the repository: it is the agent's workspace (the sandbox
    # shows the agent nothing outside it).
    workspace = ["--workspace", str(example.parents[2])]
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", cmd, *dirs, *workspace],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stderr
    log = (short_tmp / "run" / "agent.log").read_text()
    assert "trained ppo for 256 steps" in log and "episode 10:" in log
    report = json.loads((short_tmp / "run" / "result.json").read_text())
    assert report["job_state"] == "SUCCEEDED" and report["score"]["status"] == "scored"
