"""The CleanRL-style and SB3 examples under examples/agents/ run as a user would run them.

Each runs as its own process against a real evaluator (Unix sockets, ``ALE_*``
variables as the harness sets them), trains for a few hundred steps over one batched
practice session, and plays the run's eval session to its end: the run's eval job
must then be SUCCEEDED with every budget episode, as the harness would read it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ale_robotics.client import AleClient
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.tasks import Registry

ROOT = Path(__file__).resolve().parents[2]
TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-ex-1"

EXAMPLES = {
    "cleanrl_ppo.py": ["--total-timesteps", "512", "--num-envs", "2", "--num-steps", "128"],
    "sb3_vecenv.py": ["--timesteps", "512", "--num-envs", "2", "--n-steps", "128"],
}


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_the_example_trains_then_plays_the_eval_session(
    script: str, short_tmp: Path, registry: Registry
) -> None:
    """One batched practice session for training, then the eval session to its end."""
    ev = serve(
        EvaluatorConfig(short_tmp / "st", None, task_id=TASK, run_id=RUN, workers=1),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        env = {
            **os.environ,
            "ALE_ENDPOINT": ev.agent_address,
            "ALE_TOKEN": ev.agent_token,
            "ALE_TASK_ID": TASK,
            "ALE_RUN_ID": RUN,
        }
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "agents" / script), *EXAMPLES[script]],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "eval: mean return" in done.stdout
        with AleClient(ev.harness_address, ev.harness_token, run_id=RUN) as harness:
            status = harness.status()
        assert status.state == "SUCCEEDED"
        assert status.episodes_done == status.episodes_total == 10
        assert ev.evaluator.training.used(RUN) >= 512  # trained on practice steps
        assert ev.evaluator.sessions.count(RUN) == 0
    finally:
        ev.stop(grace=0.5)
