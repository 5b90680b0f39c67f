"""`ale-robotics run` end to end: a real agent process, an embedded evaluator, real sockets."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ale_robotics.trajectory import verify_file

CLI = [sys.executable, "-m", "ale_robotics"]

RANDOM_AGENT = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
spec = c.get_spec()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype) for r in spec.contract.tensors}
MUTATE
save_file(w, str(c.submission_dir / "policy.safetensors"))
print("job state:", c.wait(c.submit()).state)
"""


def _agent(tmp: Path, body: str, name: str = "agent.py") -> str:
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


def _run(tmp: Path, agent_cmd: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "run",
            "td3-inverted-pendulum-v1",
            "--agent",
            agent_cmd,
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
    )


def test_batch_run_end_to_end(short_tmp: Path) -> None:
    proc = _run(short_tmp, _agent(short_tmp, RANDOM_AGENT.replace("MUTATE", "")))
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("score: ")
    run = short_tmp / "run"
    result = json.loads((run / "result.json").read_text())
    assert result["job_state"] == "SUCCEEDED"
    assert result["eval_result"]["official"] is True
    report = result["score"]
    assert report["status"] == "scored"
    measured = report["measured"]["mean_return"]
    assert measured == result["eval_result"]["metrics"]["mean_return"]
    target = report["target_value"]  # the manifest's final-performance statistic
    assert report["score"] == pytest.approx(min(1.5, measured / target))
    assert f"{report['score']:.3f}" in last
    assert report["target_source"]["location"]  # where the value comes from, never blank
    assert (run / "episodes.png").stat().st_size > 1000
    assert "job state: SUCCEEDED" in (run / "agent.log").read_text()
    # the trajectory verifies and holds the evaluator's signed events
    rep = verify_file(run / "trajectory.jsonl", expected_head=result["trajectory_head"])
    assert rep.ok, rep.reason
    assert rep.events == result["trajectory_events"]
    kinds = [
        json.loads(line)["kind"] for line in (run / "trajectory.jsonl").read_text().splitlines()
    ]
    for k in (
        "run_started",
        "evaluator_key",
        "seed_commitment",
        "submission_received",
        "validation",
        "evaluation_started",
        "progress_summary",
        "result",
        "score",
    ):
        assert k in kinds
    cli = subprocess.run(
        [*CLI, "trajectory", "verify", str(run / "trajectory.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr


def test_rejected_submission_scores_zero_with_reason(short_tmp: Path) -> None:
    agent = _agent(short_tmp, RANDOM_AGENT.replace("MUTATE", "w.pop('l3.bias')"))
    proc = _run(short_tmp, agent)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("score: 0.000")
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["job_state"] == "REJECTED"
    assert "l3.bias" in result["eval_result"]["failure_reason"]
    assert result["score"]["score"] == 0.0


def test_agent_without_submission_scores_zero(short_tmp: Path) -> None:
    proc = _run(short_tmp, _agent(short_tmp, "print('giving up')\n"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("score: 0.000")
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["job_state"] == "NO_SUBMISSION"
    assert "no submission" in result["score"]["explanation"]


def test_budget_is_enforced(short_tmp: Path) -> None:
    agent = _agent(short_tmp, "import time\ntime.sleep(120)\n")
    proc = _run(short_tmp, agent, "--budget", "2")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["agent_budget_exceeded"] is True
    assert result["wall_s"] < 120  # stopped at its budget, not left to sleep out its 120 s


def test_agent_cannot_see_the_harness_token(short_tmp: Path) -> None:
    agent = _agent(short_tmp, "import json, os\nprint(json.dumps(dict(os.environ)))\n")
    proc = _run(short_tmp, agent)
    assert proc.returncode == 0, proc.stderr
    log = (short_tmp / "run" / "agent.log").read_text()
    env = json.loads(log.strip().splitlines()[-1])
    assert {"ALE_ENDPOINT", "ALE_TOKEN", "ALE_TASK_ID", "ALE_RUN_ID", "ALE_SUBMISSION_DIR"} <= set(
        env
    )
    harness_token = (short_tmp / "state" / "harness.token").read_text().strip()
    assert harness_token not in log
    # a token minted for this run, never the state dir's shared agent.token (issue 26)
    state_tokens = "".join(p.read_text() for p in (short_tmp / "state").glob("*.token"))
    assert env["ALE_TOKEN"] and env["ALE_TOKEN"] not in state_tokens


def test_unknown_task_is_a_clear_error(short_tmp: Path) -> None:
    proc = subprocess.run(
        [*CLI, "run", "td3-inverted-pendulm-v1", "--agent", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=short_tmp,
    )
    assert proc.returncode == 2
    assert "did you mean td3-inverted-pendulum-v1" in proc.stderr
