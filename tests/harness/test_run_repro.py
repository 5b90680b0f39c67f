"""A reproduction task end to end: the gate rests on what the evaluator and the harness observed.

Real runs of ``ale-robotics run td3-walker2d-repro-v1`` (bubblewrap where it starts, real
MuJoCo in the evaluator, which alone has the simulator): the forged agent of issue 17 fails
the gate naming the evaluator's evidence, a short real TD3 training through a practice session
with committed checkpoints passes it, and agents that try the next tricks fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.scoring.report import fmt_number

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
TASK = "td3-walker2d-repro-v1"

AGENT = """
import json
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
spec = c.get_spec()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype) for r in spec.contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
meta = {"algorithm": "ALGO", "training_steps": 3000, "seeds": [0], "final_eval_return": 12.5}
(c.submission_dir / "meta.json").write_text(META)
(c.submission_dir / "curve.csv").write_text("step,eval_return\\n1000,3.0\\n2000,8.0\\n3000,12.5\\n")
print(c.wait(c.submit()).state)
"""

# Practises with random actions (no learning at all) and commits three checkpoints spread over
# those steps, then submits a policy that is not the last checkpoint.
SWAP_AGENT = """
import json
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient, RemoteEnv
c = AleClient.from_env()
spec = c.get_spec()
rng = np.random.default_rng(0)
def weights():
    return {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
            for r in spec.contract.tensors}
env = RemoteEnv(c, kind="practice")
env.reset(seed=0)
for _ in range(3):
    for _ in range(200):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    save_file(weights(), str(c.submission_dir / "policy.safetensors"))
    print(c.submit_checkpoint())
env.close()
save_file(weights(), str(c.submission_dir / "policy.safetensors"))  # not the last checkpoint
(c.submission_dir / "meta.json").write_text(json.dumps({"algorithm": "TD3"}))
print(c.wait(c.submit()).state)
"""


def _run(
    tmp: Path, agent_cmd: str, *, timeout: float = 240, workspace: Path = ROOT
) -> dict[str, Any]:
    """``ale-robotics run`` of the task; the example agents are in the repository's workspace,
    a test's own script in ``tmp`` (then the workspace)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            TASK,
            "--agent",
            agent_cmd,
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--workspace",
            str(workspace),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads((tmp / "run" / "result.json").read_text())
    doc["_line"] = proc.stdout.strip().splitlines()[-1]
    doc["_log"] = (tmp / "run" / "agent.log").read_text(errors="replace")
    return doc


def _run_script(tmp: Path, text: str) -> dict[str, Any]:
    agent = tmp / "agent.py"
    agent.write_text(textwrap.dedent(text))
    return _run(tmp, f"{sys.executable} {agent}", workspace=tmp)


def _checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["score"]["gate"]["checks"]}


def _policy_sha(doc: dict[str, Any]) -> str:
    files = doc["eval_result"]["submission_files"]
    (sha,) = [v for k, v in files.items() if k.startswith("policy.")]
    return str(sha)


def test_the_forged_agent_fails_naming_the_evaluators_evidence(short_tmp: Path) -> None:
    """Issue 17's forgery: random actor, meta.json claiming TD3 and 1M steps, a curve.csv
    ramping to 4600, no training. It passed all four checks before; now it scores 0."""
    doc = _run(short_tmp, f"python {AGENTS / 'forged_repro.py'}")
    report = doc["score"]
    assert doc["job_state"] == "SUCCEEDED"
    assert (report["status"], report["score"]) == ("gate_failed", 0.0)
    checks = _checks(doc)
    assert checks["architecture"]["passed"] and checks["architecture"]["verified"]
    declared = checks["algorithm_allowlist"]
    assert declared["passed"] and not declared["verified"]
    assert declared["evidence"] == "declared"
    assert declared["reason"].startswith("declared, not verified")
    assert checks["budget"]["reason"] == (
        "meta.json declares training_steps 1,000,000, but the evaluator observed 0 practice steps"
    )
    assert checks["learning_curve"]["reason"] == (
        "0 practice steps observed; 0 checkpoints evaluated (at least 3 needed)"
    )
    floor = doc["score"]["floor"]  # doing nothing on the run's hidden seeds, beside the 0
    assert floor is not None and doc["score"]["floor_normalized"] is None  # not scored
    assert doc["_line"] == (
        "score: 0.000 (faithfulness gate failed: budget: meta.json declares training_steps "
        f"1,000,000, but the evaluator observed 0 practice steps) [floor {fmt_number(floor)}]"
    )
    assert doc["eval_result"]["training"]["agent_steps"] == 0
    assert doc["eval_result"]["learning_curve"] == []
    assert "algorithm_allowlist on the agent's declaration only" in report["explanation"]
    assert (short_tmp / "run" / "learning_curve.png").is_file()  # the paper's curve, no points


def test_a_forged_checkpoint_without_training_fails_too(short_tmp: Path) -> None:
    doc = _run(short_tmp, f"python {AGENTS / 'forged_repro.py'} --commit-checkpoint")
    assert "committed checkpoint 0 at 0 practice steps" in doc["_log"]
    assert doc["score"]["status"] == "gate_failed"
    assert _checks(doc)["learning_curve"]["reason"] == (
        "0 practice steps observed; 1 checkpoints evaluated (at least 3 needed)"
    )
    (point,) = doc["eval_result"]["learning_curve"]
    assert point["practice_steps"] == 0 and point["policy_sha256"] == _policy_sha(doc)


@pytest.mark.slow  # a real TD3 training run through the gate: about 35 s on two cores
def test_a_short_real_td3_training_passes_the_gate(short_tmp: Path) -> None:
    """examples/agents/td3_train.py: TD3 on a practice session of the batch task (the sandbox
    has no MuJoCo), a checkpoint every 500 steps, the last one submitted. Took about 20 s."""
    started = time.monotonic()
    cmd = (
        f"python {AGENTS / 'td3_train.py'} --timesteps 1500 --learning-starts 500 "
        "--checkpoint-every 500 --margin-s 5"
    )
    doc = _run(short_tmp, cmd, timeout=280)
    took = time.monotonic() - started
    report = doc["score"]
    assert doc["job_state"] == "SUCCEEDED", doc["_log"][-2000:]
    assert report["status"] == "scored", report["explanation"]
    assert report["gate"]["passed"] is True
    assert report["score"] == pytest.approx(report["measured"]["mean_return"] / 4565.24)
    # The evaluator's own step count and curve are in result.json.
    result = doc["eval_result"]
    assert result["training"]["agent_steps"] == 1500
    curve = result["learning_curve"]
    assert [p["practice_steps"] for p in curve] == [500, 1000, 1500]
    assert all(p["episodes"] == 3 for p in curve)
    assert curve[-1]["policy_sha256"] == _policy_sha(doc)
    assert len({p["policy_sha256"] for p in curve}) == 3  # three different policies
    checks = _checks(doc)
    assert [(c["name"], c["evidence"], c["verified"]) for c in checks.values()] == [
        ("architecture", "tensors", True),
        ("algorithm_allowlist", "declared", False),
        ("budget", "evaluator", True),
        ("learning_curve", "evaluator", True),
    ]
    assert checks["budget"]["reason"].startswith(
        "1,500 practice steps observed by the evaluator, budget 1,000,000 (meta.json declares "
        "1,500); harness: agent wall clock "
    )
    assert checks["learning_curve"]["reason"].startswith(
        "3 checkpoints evaluated by the evaluator at 500..1,500 practice steps (largest gap 500)"
    )
    harness = doc["harness_evidence"]
    assert 0 < harness["wall_s"] < took and harness["wall_budget_s"] == 7200
    assert "checkpoint 2 at 1500 steps (evaluator counted 1500" in doc["_log"]
    assert (short_tmp / "run" / "learning_curve.png").stat().st_size > 10_000


def test_a_submitted_policy_other_than_the_last_checkpoint_fails(short_tmp: Path) -> None:
    doc = _run_script(short_tmp, SWAP_AGENT)
    assert doc["score"]["status"] == "gate_failed", doc["_log"][-2000:]
    curve = doc["eval_result"]["learning_curve"]
    assert [p["practice_steps"] for p in curve] == [200, 400, 600]
    checks = _checks(doc)
    assert checks["budget"]["passed"]  # 600 practice steps: well within the budget
    reason = checks["learning_curve"]["reason"]
    assert reason.startswith("the last checkpoint (2, at 600 practice steps, policy sha256 ")
    assert reason.endswith(f"is not the submitted policy (sha256 {_policy_sha(doc)[:12]})")


def test_wrong_algorithm_fails_the_gate_with_the_check_named(short_tmp: Path) -> None:
    meta = "json.dumps(meta)"
    doc = _run_script(short_tmp, AGENT.replace("ALGO", "PPO").replace("META", meta))
    assert doc["score"]["status"] == "gate_failed"
    assert doc["score"]["score"] == 0.0
    assert doc["_line"].startswith("score: 0.000 (faithfulness gate failed: algorithm_allowlist")


def test_malformed_evidence_is_rejected_by_the_evaluator(short_tmp: Path) -> None:
    agent = AGENT.replace("ALGO", "TD3").replace("META", "'{not json'")
    doc = _run_script(short_tmp, agent)
    assert doc["job_state"] == "REJECTED"
    assert "meta.json" in doc["eval_result"]["failure_reason"]
    assert "rule: json format" in doc["eval_result"]["failure_reason"]


def test_deeply_nested_evidence_is_rejected_not_an_infrastructure_failure(short_tmp: Path) -> None:
    doc = _run_script(short_tmp, AGENT.replace("META", "'[' * 60000"))
    assert doc["job_state"] == "REJECTED"
    assert "rule: json format" in doc["eval_result"]["failure_reason"]
