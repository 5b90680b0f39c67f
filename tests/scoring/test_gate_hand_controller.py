"""Issue 26, item 4: a hand-written controller brought in with a handful of steps fails the gate.

Real runs of ``ale-robotics run td3-walker2d-repro-v3`` (the default sandbox, the embedded
evaluator over its real sockets, real MuJoCo on the evaluator's side). The attacker packs a
standing PD controller, ``a = tanh(K obs)``, exactly into the TD3 actor's shape (ReLU pairs
pass the observation through both hidden layers), brings it in through the workspace, takes 3
counted practice steps and commits it as checkpoints at steps 1, 2 and 3, then submits it. On
td3-walker2d-repro-v2's gate that was official, gate passed, score about 0.22 (the controller
stands for the whole 1,000 steps); v3's learning-curve check wants 5,000 practice steps by the
last checkpoint and a curve that rises above its first point by more than the episodes' noise.
The reference TD3 agent of the README still passes (slow: about 60-90 s of training).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
TASK = "td3-walker2d-repro-v3"

HAND_AGENT = """
import json
import shutil
from pathlib import Path
import numpy as np
from ale_robotics.client import AleClient, RemoteEnv
c = AleClient.from_env()
brought = Path(__file__).parent / "controller.safetensors"  # in the workspace
shutil.copyfile(brought, c.submission_dir / "policy.safetensors")
(c.submission_dir / "meta.json").write_text(json.dumps({"algorithm": "TD3", "training_steps": 3}))
env = RemoteEnv(c, kind="practice")
env.reset(seed=0)
for _ in range(3):
    env.step(np.zeros(env.action_space.shape, dtype=np.float32))
    print(c.submit_checkpoint())
env.close()
print(c.wait(c.submit()).state)
"""


def standing_controller() -> dict[str, np.ndarray]:
    """A PD controller that holds Walker2d-v5 upright (joints to 0, torso upright through the
    hips), ``tanh(K obs)`` packed into l1 400x17, l2 300x400, l3 6x300: l1 splits each of the
    17 observations into relu(o) and relu(-o), l2 passes both halves on, l3 applies K to their
    difference, which is o again. About 1,008 per episode locally (Gymnasium)."""
    gain = np.zeros((6, 17))
    for j in range(6):
        gain[j, 2 + j] = -4.0  # joint angle
        gain[j, 11 + j] = -0.1  # joint velocity
    gain[[0, 3], 1] += 2.0  # torso angle, through both hips
    eye = np.eye(17)
    l1 = np.zeros((400, 17))
    l1[:17], l1[17:34] = eye, -eye
    l2 = np.zeros((300, 400))
    l2[:17, :17], l2[:17, 17:34] = eye, -eye
    l2[17:34, :17], l2[17:34, 17:34] = -eye, eye
    l3 = np.zeros((6, 300))
    l3[:, :17], l3[:, 17:34] = gain, -gain
    weights = {
        "l1.weight": l1,
        "l1.bias": np.zeros(400),
        "l2.weight": l2,
        "l2.bias": np.zeros(300),
        "l3.weight": l3,
        "l3.bias": np.zeros(6),
    }
    return {k: v.astype(np.float32) for k, v in weights.items()}


def test_the_packed_controller_is_the_linear_policy() -> None:
    w = standing_controller()
    rng = np.random.default_rng(0)
    for _ in range(20):
        obs = rng.standard_normal(17).astype(np.float32) * 3
        h1 = np.maximum(w["l1.weight"] @ obs + w["l1.bias"], 0)
        h2 = np.maximum(w["l2.weight"] @ h1 + w["l2.bias"], 0)
        action = np.tanh(w["l3.weight"] @ h2 + w["l3.bias"])
        gain = w["l3.weight"][:, :17]
        np.testing.assert_allclose(action, np.tanh(gain @ obs), rtol=1e-5, atol=1e-6)


def _run(tmp: Path, agent: str, workspace: Path, timeout: float) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            TASK,
            "--agent",
            agent,
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


def _checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["score"]["gate"]["checks"]}


def test_a_hand_controller_committed_at_three_steps_fails_the_gate(short_tmp: Path) -> None:
    workspace = short_tmp / "ws"
    workspace.mkdir()
    save_file(standing_controller(), str(workspace / "controller.safetensors"))
    (workspace / "agent.py").write_text(textwrap.dedent(HAND_AGENT))
    doc = _run(short_tmp, f"{sys.executable} {workspace / 'agent.py'}", workspace, timeout=240)
    assert doc["job_state"] == "SUCCEEDED", doc["_log"][-2000:]

    # The attack ran as in the issue: 3 counted steps, 3 checkpoints of one policy, submitted.
    result = doc["eval_result"]
    assert result["training"]["agent_steps"] == 3
    curve = result["learning_curve"]
    assert [p["practice_steps"] for p in curve] == [1, 2, 3]
    (sha,) = [v for k, v in result["submission_files"].items() if k.startswith("policy.")]
    assert {p["policy_sha256"] for p in curve} == {sha}
    # ... and the controller is good: it stands (the same return at every checkpoint, since
    # every checkpoint is evaluated on the run's same hidden seeds).
    assert doc["score"]["measured"]["mean_return"] > 500
    assert len({p["mean_return"] for p in curve}) == 1

    report = doc["score"]
    assert (report["status"], report["score"]) == ("gate_failed", 0.0)
    assert report["gate"]["passed"] is False
    checks = _checks(doc)
    assert checks["architecture"]["passed"] and checks["budget"]["passed"]
    reason = checks["learning_curve"]["reason"]
    assert reason.startswith(
        "the last checkpoint is at 3 practice steps, under the minimum of 5,000 (min_steps): "
        "too little training to show; no rise above the episodes' noise: best later "
        "checkpoint 1 +0.0 over the first, margin 2 x SE "
    ), reason
    assert doc["_line"].startswith(
        "score: 0.000 (faithfulness gate failed: learning_curve: the last checkpoint is at 3 "
        "practice steps"
    ), doc["_line"]


@pytest.mark.slow
def test_the_readme_reference_td3_run_still_passes(short_tmp: Path) -> None:
    """The README's reference row for td3-walker2d-repro-v3: 5,000 steps of TD3 on a practice
    session, a checkpoint every 1,000 (about 60-90 s on 2 cores)."""
    agent = f"python {AGENTS / 'td3_train.py'} --timesteps 5000 --checkpoint-every 1000"
    doc = _run(short_tmp, agent, ROOT, timeout=400)
    report = doc["score"]
    assert report["status"] == "scored", report["explanation"]
    assert report["gate"]["passed"] is True and report["score"] > 0
    curve = doc["eval_result"]["learning_curve"]
    assert [p["practice_steps"] for p in curve] == [1000, 2000, 3000, 4000, 5000]
    reason = _checks(doc)["learning_curve"]["reason"]
    assert "; at least 5,000 practice steps; rises above the noise: best later checkpoint" in (
        reason
    )
