"""`ale-robotics audit`: a real run, then the revealed secret recomputes seeds and metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ale_robotics.audit import audit_run, read_secret

AGENT = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
rng = np.random.default_rng(4)
rules = c.get_spec().contract.tensors
w = {r.key: (rng.standard_normal(r.shape) * 0.2).astype(r.dtype) for r in rules}
save_file(w, str(c.submission_dir / "policy.safetensors"))
c.wait(c.submit())
"""


def _run(tmp: Path) -> Path:
    (tmp / "agent.py").write_text(AGENT)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            "td3-inverted-pendulum-v1",
            "--agent",
            f"{sys.executable} {tmp / 'agent.py'}",
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
    return tmp / "run"


def test_audit_confirms_an_honest_run_and_catches_tampering(short_tmp: Path) -> None:
    run = _run(short_tmp)
    secret = read_secret(short_tmp / "state" / "secret")
    report = audit_run(run, secret, workers=1)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert {c.name for c in report.checks} >= {"trajectory", "seed commitments", "metrics"}

    wrong = audit_run(run, b"\x01" * 32, workers=1)
    failed = {c.name for c in wrong.checks if not c.ok}
    assert {"secret commitment", "seed commitments"} <= failed

    doc = json.loads((run / "result.json").read_text())
    doc["eval_result"]["metrics"]["mean_return"] += 1.0
    (run / "result.json").write_text(json.dumps(doc))
    edited = audit_run(run, secret, workers=1)
    # the re-run still matches the signed metrics; result.json's claim does not
    mismatches = {c.name: c.detail for c in edited.checks if not c.ok}
    assert list(mismatches) == ["signed result"], mismatches
    assert "metrics mean_return" in mismatches["signed result"]
    assert "differs from the signed `result` event #" in mismatches["signed result"]

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "audit",
            str(run),
            "--secret",
            str(short_tmp / "state" / "secret"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert cli.returncode == 1 and "FAIL" in cli.stdout


def test_audit_of_a_replay_task_reruns_the_hidden_subset(short_tmp: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    agent = root / "examples" / "agents" / "fetch_scripted.py"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            "fetch-pickplace-trajset-v1",
            "--agent",
            f"{sys.executable} {agent}",
            "--run-dir",
            str(short_tmp / "run"),
            "--state-dir",
            str(short_tmp / "state"),
            "--workers",
            "1",
            "--workspace",  # the example agent lives in the repository
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stderr
    report = audit_run(short_tmp / "run", read_secret(short_tmp / "state" / "secret"), workers=1)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert "metrics" in {c.name for c in report.checks}
