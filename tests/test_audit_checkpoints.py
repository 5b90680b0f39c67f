"""`ale-robotics audit` re-evaluates a run's checkpoints from their snapshots.

One real run of td3-walker2d-repro-v1 (``python -m ale_robotics run``, a real agent
process training through practice sessions in the embedded evaluator, committing
three checkpoints and one whose actions are NaN, then its final policy). The audit
confirms it; then each test tampers with a copy: a snapshot deleted or swapped, a
checkpoint event re-signed with the evaluator's own key but better numbers (only a
re-run can catch it), a trajectory line edited, result.json's curve, failures or
training count edited.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.audit import AuditReport, audit_run, read_secret
from ale_robotics.tasks import default_registry
from ale_robotics.trajectory import EvaluatorSigner, build_event

ROOT = Path(__file__).resolve().parent.parent
TASK = "td3-walker2d-repro-v1"

# the NaN checkpoint's rollouts overflow on purpose (the audit re-runs them in this process)
pytestmark = [
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

AGENT = """
import json
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient, RemoteVectorEnv
c = AleClient.from_env()
rules = c.get_spec().contract.tensors
sub = c.submission_dir
env = RemoteVectorEnv.from_env(num_envs=2)
env.reset(seed=3)
for k in range(3):
    rng = np.random.default_rng(k)
    w = {r.key: (rng.standard_normal(r.shape) * 0.3).astype(r.dtype) for r in rules}
    save_file(w, str(sub / "policy.safetensors"))
    c.submit_checkpoint()
    for _ in range(20):
        env.step(np.zeros((2, 6), np.float32))
# finite weights whose actions are NaN (inf - inf in the last layer), in a folder of its own
w = {r.key: np.zeros(r.shape, r.dtype) for r in rules}
w["l1.bias"][:] = 3e38
w["l2.weight"][:] = 3e38
w["l3.weight"][:] = np.where(np.arange(300) % 2 == 0, 1.0, -1.0)
(sub / "nan").mkdir()
save_file(w, str(sub / "nan" / "policy.safetensors"))
try:
    print("nan checkpoint:", c.submit_checkpoint(sub / "nan"))
except Exception as exc:  # releases before answered this one with an error
    print("nan checkpoint refused:", exc)
env.close()
meta = {"algorithm": "TD3", "training_steps": 120, "seeds": [0], "final_eval_return": 1.0}
(sub / "meta.json").write_text(json.dumps(meta))
(sub / "curve.csv").write_text("step,eval_return\\n0,0.5\\n120,1.0\\n")
c.wait(c.submit())
"""


@dataclass(frozen=True)
class Run:
    run: Path
    state: Path

    @property
    def secret(self) -> bytes:
        return read_secret(self.state / "secret")

    def audit(self, *, with_state_dir: bool = True) -> AuditReport:
        state = self.state if with_state_dir else None
        return audit_run(self.run, self.secret, workers=1, state_dir=state)

    def checkpoint_ids(self) -> list[str]:
        doc = json.loads((self.run / "result.json").read_text())
        return [p["checkpoint_id"] for p in doc["eval_result"]["learning_curve"]]


@pytest.fixture(scope="module")
def original() -> Iterator[Run]:
    with tempfile.TemporaryDirectory(prefix="ale-t-") as d:  # short: Unix socket paths
        root = Path(d)
        (root / "agent.py").write_text(AGENT)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ale_robotics",
                "run",
                TASK,
                "--agent",
                f"{sys.executable} {root / 'agent.py'}",
                "--run-dir",
                str(root / "run"),
                "--state-dir",
                str(root / "state"),
                "--sandbox",
                "none",
                "--workers",
                "1",
                "--workspace",
                str(ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=root,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield Run(root / "run", root / "state")


@pytest.fixture
def run(original: Run, tmp_path: Path) -> Run:
    """A copy of the genuine run (and of its evaluator's state dir) to tamper with."""
    copy = Run(tmp_path / "run", tmp_path / "state")
    shutil.copytree(original.run, copy.run)
    shutil.copytree(original.state, copy.state)
    return copy


def _failed(report: AuditReport) -> dict[str, str]:
    return {c.name: c.detail for c in report.checks if not c.ok}


def test_the_audit_re_evaluates_every_checkpoint_of_an_honest_run(run: Run) -> None:
    report = run.audit()
    assert report.ok, _failed(report)
    details = {c.name: c.detail for c in report.checks}
    assert {"checkpoint seed commitments", "checkpoints", "learning curve", "training steps"} <= (
        set(details)
    )
    for i in range(3):
        assert (
            "re-run from its snapshot on 3 checkpoint seeds matches" in details[f"checkpoint {i}"]
        )
    assert "3 points match the signed checkpoint events" in details["learning curve"]
    assert "trained 120 / 1,000,000 agent steps" in details["training steps"]
    # without the state dir nothing can be re-run: that fails, saying what to pass
    blind = _failed(run.audit(with_state_dir=False))
    assert set(blind) == {"checkpoint 0", "checkpoint 1", "checkpoint 2", "checkpoint 3"}
    assert all("pass the state dir of the evaluator" in d for d in blind.values())
    # a wrong secret gives other checkpoint seeds than the committed ones
    wrong = audit_run(run.run, b"\x01" * 32, workers=1, state_dir=run.state)
    assert "checkpoint seed commitments" in _failed(wrong)
    assert (
        "seed commitments of episodes [0, 1, 2] are not the run's" in _failed(wrong)["checkpoint 0"]
    )


def test_a_missing_or_swapped_snapshot_fails(run: Run) -> None:
    ids = run.checkpoint_ids()
    shutil.rmtree(run.state / "snapshots" / f"ckpt-{ids[1]}")
    policy = run.state / "snapshots" / f"ckpt-{ids[0]}" / "policy.safetensors"
    policy.unlink()
    save_file(random_weights(default_registry().get(TASK), seed=99), str(policy))
    failed = _failed(run.audit())
    assert set(failed) == {"checkpoint 0", "checkpoint 1"}, failed
    assert "is missing: the checkpoint cannot be re-run" in failed["checkpoint 1"]
    assert "not the files the signed `checkpoint` event" in failed["checkpoint 0"]


def _rewrite(run: Run, edit: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
    """Rebuild trajectory.jsonl with ``edit`` applied to each checkpoint payload, every
    evaluator event re-signed with the evaluator's own key and the chain recomputed:
    what a dishonest evaluator could publish. result.json follows the new head."""
    signer = EvaluatorSigner.load_or_create(run.state / "signing_key.pem")
    path = run.run / "trajectory.jsonl"
    prev = "0" * 64
    lines = []
    for raw in path.read_bytes().splitlines():
        event = json.loads(raw)
        payload = event["payload"]
        sig = event["sig"]
        if event["kind"] == "checkpoint":
            payload = edit(payload) or payload
        if sig is not None:
            signed = signer.sign_event(
                event["run_id"], event["kind"], payload, sig["eval_seq"], event["time"]
            )
            sig = signed.sig
        new = build_event(
            seq=event["seq"],
            prev_hash=prev,
            run_id=event["run_id"],
            level=event["level"],
            kind=event["kind"],
            payload=payload,
            time=event["time"],
            sig=sig,
        )
        prev = new.hash
        lines.append(new.to_line())
    path.write_bytes(b"".join(lines))
    doc = json.loads((run.run / "result.json").read_text())
    doc["trajectory_head"] = prev
    (run.run / "result.json").write_text(json.dumps(doc))


def _events(run: Run) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run.run / "trajectory.jsonl").read_bytes().splitlines()]


def test_a_re_signed_checkpoint_with_better_numbers_fails_its_re_run(run: Run) -> None:
    def better(payload: dict[str, Any]) -> dict[str, Any] | None:
        if payload["index"] != 2:
            return None
        for episode in payload["episodes"]:
            episode["episode_return"] += 1000.0
        returns = np.asarray([e["episode_return"] for e in payload["episodes"]], np.float64)
        # consistent with its episodes: only a re-run can tell
        payload["metrics"] = {
            "mean_return": float(returns.mean()),
            "std_return": float(returns.std()),
        }
        return payload

    _rewrite(run, better)
    doc = json.loads((run.run / "result.json").read_text())
    forged = [e for e in _events(run) if e["kind"] == "checkpoint"][2]["payload"]
    doc["eval_result"]["learning_curve"][2].update(forged["metrics"])  # the claim follows
    (run.run / "result.json").write_text(json.dumps(doc))
    failed = _failed(run.audit())
    assert "trajectory" not in failed and "learning curve" not in failed  # validly signed
    assert "checkpoint 2" in failed and "checkpoint 1" not in failed, failed
    assert "the re-run differs from the signed `checkpoint` event" in failed["checkpoint 2"]
    signed_return = forged["episodes"][0]["episode_return"]
    assert "episodes: episode 0 re-run (return " in failed["checkpoint 2"]
    assert f"vs signed (return {signed_return!r}," in failed["checkpoint 2"]


def test_an_edited_checkpoint_event_breaks_the_trajectory(run: Run) -> None:
    path = run.run / "trajectory.jsonl"
    text = path.read_text()
    assert '"practice_steps":40' in text
    path.write_text(text.replace('"practice_steps":40', '"practice_steps":400', 1))
    failed = _failed(run.audit())
    assert "trajectory" in failed
    assert failed["checkpoints"] == "not checked: the trajectory does not verify"


def test_result_json_curve_and_training_are_checked_against_the_signed_events(
    run: Run,
) -> None:
    doc = json.loads((run.run / "result.json").read_text())
    doc["eval_result"]["learning_curve"][1]["practice_steps"] = 60
    doc["eval_result"]["training"]["agent_steps"] = 100_000
    (run.run / "result.json").write_text(json.dumps(doc))
    failed = _failed(run.audit())
    assert "learning curve" in failed and "training steps" in failed, failed
    assert (
        "is not the signed checkpoints before the signed `result` event"
        in (failed["learning curve"])
    )
    assert "[1].practice_steps: 60 vs 40" in failed["learning curve"]
    dropped = json.loads((run.run / "result.json").read_text())
    dropped["eval_result"]["learning_curve"] = dropped["eval_result"]["learning_curve"][1:]
    (run.run / "result.json").write_text(json.dumps(dropped))
    assert "learning curve" in _failed(run.audit())  # dropping the weak start fails too


def test_a_failed_checkpoint_is_signed_counted_re_run_and_no_point_of_the_curve(run: Run) -> None:
    """The NaN checkpoint (issue 26, item 3): answered like the others, it is in the signed
    trajectory at the evaluator's level, received and failed; result.json lists it apart
    from the curve; the audit re-runs it from its snapshot and it fails the same way."""
    events = _events(run)
    ours = [e for e in events if e["kind"].startswith("checkpoint")]
    assert all(e["level"] == "trusted_evaluator" and e["sig"] for e in ours)
    received = [e["payload"] for e in ours if e["kind"] == "checkpoint_received"]
    assert [r["index"] for r in received] == [0, 1, 2, 3]
    (failed,) = [e["payload"] for e in ours if e["kind"] == "checkpoint_failed"]
    assert (failed["index"], failed["source"], failed["rule"]) == (
        3,
        "submission",
        "non_finite_action",
    )
    assert failed["practice_steps"] == 120
    doc = json.loads((run.run / "result.json").read_text())["eval_result"]
    assert [p["index"] for p in doc["learning_curve"]] == [0, 1, 2]
    assert [(f["index"], f["rule"]) for f in doc["failed_checkpoints"]] == [
        (3, "non_finite_action")
    ]
    details = {c.name: c.detail for c in run.audit().checks}
    assert "re-run from its snapshot fails as the signed" in details["checkpoint 3"]
    assert "4 signed checkpoints, in order: 3 measured, 1 failed" in details["checkpoints"]
    assert "1 match the signed checkpoint_failed events" in details["failed checkpoints"]

    # result.json that drops the failure is caught
    whole = json.loads((run.run / "result.json").read_text())
    whole["eval_result"]["failed_checkpoints"] = []
    (run.run / "result.json").write_text(json.dumps(whole))
    assert "failed checkpoints" in _failed(run.audit())


def test_a_re_signed_failure_that_the_re_run_contradicts_fails(run: Run) -> None:
    """A failure re-signed with another rule (what a dishonest evaluator could publish)
    fails its re-run."""
    signer = EvaluatorSigner.load_or_create(run.state / "signing_key.pem")
    path = run.run / "trajectory.jsonl"
    prev = "0" * 64
    lines = []
    for raw in path.read_bytes().splitlines():
        event = json.loads(raw)
        payload, sig = event["payload"], event["sig"]
        if event["kind"] == "checkpoint_failed":
            payload["rule"] = "contract"
        if sig is not None:
            sig = signer.sign_event(
                event["run_id"], event["kind"], payload, sig["eval_seq"], event["time"]
            ).sig
        new = build_event(
            seq=event["seq"],
            prev_hash=prev,
            run_id=event["run_id"],
            level=event["level"],
            kind=event["kind"],
            payload=payload,
            time=event["time"],
            sig=sig,
        )
        prev = new.hash
        lines.append(new.to_line())
    path.write_bytes(b"".join(lines))
    doc = json.loads((run.run / "result.json").read_text())
    doc["trajectory_head"] = prev
    doc["eval_result"]["failed_checkpoints"][0]["rule"] = "contract"
    (run.run / "result.json").write_text(json.dumps(doc))
    failed = _failed(run.audit())
    assert set(failed) == {"checkpoint 3"}, failed
    assert (
        "failed by non_finite_action (submission), not by the signed contract"
        in (failed["checkpoint 3"])
    )
