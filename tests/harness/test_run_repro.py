"""A reproduction task end to end: evidence travels from the snapshot to the harness's gate."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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


def _run(tmp: Path, algorithm: str, meta: str = "json.dumps(meta)") -> dict:
    agent = tmp / "agent.py"
    agent.write_text(textwrap.dedent(AGENT.replace("ALGO", algorithm).replace("META", meta)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            "td3-walker2d-repro-v1",
            "--agent",
            f"{sys.executable} {agent}",
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp / "run" / "result.json").read_text())
    doc["_line"] = proc.stdout.strip().splitlines()[-1]
    return doc


def test_faithful_reproduction_passes_the_gate(short_tmp: Path) -> None:
    doc = _run(short_tmp, "TD3")
    report = doc["score"]
    assert report["status"] == "scored", report["explanation"]
    assert report["gate"]["passed"] is True
    assert {c["kind"] for c in report["gate"]["checks"]} == {
        "architecture",
        "algorithm_allowlist",
        "budget",
        "learning_curve",
    }
    assert report["score"] == pytest.approx(report["measured"]["mean_return"] / 4565.24)


def test_wrong_algorithm_fails_the_gate_with_the_check_named(short_tmp: Path) -> None:
    doc = _run(short_tmp, "PPO")
    assert doc["score"]["status"] == "gate_failed"
    assert doc["score"]["score"] == 0.0
    assert doc["_line"].startswith("score: 0.000 (faithfulness gate failed: algorithm_allowlist")


def test_malformed_evidence_is_rejected_by_the_evaluator(short_tmp: Path) -> None:
    doc = _run(short_tmp, "TD3", meta="'{not json'")
    assert doc["job_state"] == "REJECTED"
    assert "meta.json" in doc["eval_result"]["failure_reason"]
    assert "rule: json format" in doc["eval_result"]["failure_reason"]


def test_deeply_nested_evidence_is_rejected_not_an_infrastructure_failure(short_tmp: Path) -> None:
    doc = _run(short_tmp, "TD3", meta="'[' * 60000")
    assert doc["job_state"] == "REJECTED"
    assert "rule: json format" in doc["eval_result"]["failure_reason"]
