"""`ale-robotics audit` against forged run reports (issue 12, point 3).

A weak run is forged into a perfect one: the shipped TD3 checkpoint is swapped
into its submission directory and result.json rewritten with the genuine numbers
of a good run (mean_return 1000, score 1.0, the new file's sha256), while
trajectory.jsonl stays byte for byte intact. Re-running the swapped checkpoint
reproduces the forged metrics exactly, so only a comparison with the evaluator's
signed events can catch it: the audit must fail naming the signed
``submission_received`` and ``result`` events. Every run here is real
(``python -m ale_robotics run``, a real agent process, the embedded evaluator).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.audit import AuditReport, audit_run, read_secret
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.scoring import ScoreReport, score
from ale_robotics.tasks import default_registry

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"
CHECKPOINT = ROOT / "examples" / "agents" / "checkpoints" / TASK / "policy.safetensors"

WEAK_AGENT = """
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

INTERACTIVE_AGENT = """
import numpy as np
from ale_robotics.client import RemoteEnv
W = np.random.default_rng(0).standard_normal(9) * 0.3
env = RemoteEnv.from_env(kind="eval")
while not env.eval_complete:
    obs, _ = env.reset()
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(np.tanh([(obs * W).sum()]).astype(np.float32))
        done = terminated or truncated
env.close()
"""


@dataclass(frozen=True)
class Runs:
    """Genuine runs shared by the module's tests (each test forges a copy)."""

    root: Path
    weak: Path
    weak_smoke: Path
    good: Path
    state: Path

    @property
    def secret_file(self) -> Path:
        return self.state / "secret"


def _run(root: Path, name: str, agent_cmd: str, *extra: str, task: str = TASK) -> Path:
    """One real ``ale-robotics run``; every run shares the state dir, hence the secret."""
    proc = subprocess.run(
        [
            *CLI,
            "run",
            task,
            "--agent",
            agent_cmd,
            "--run-dir",
            str(root / name),
            "--state-dir",
            str(root / "state"),
            "--sandbox",
            "none",
            "--workers",
            "1",
            "--workspace",
            str(ROOT),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / name


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    with tempfile.TemporaryDirectory(prefix="ale-t-") as d:  # short: Unix socket paths
        root = Path(d)
        (root / "weak.py").write_text(WEAK_AGENT)
        weak_cmd = f"{sys.executable} {root / 'weak.py'}"
        good_cmd = f"{sys.executable} {ROOT / 'examples' / 'agents' / 'submit_checkpoint.py'}"
        yield Runs(
            root=root,
            weak=_run(root, "weak", weak_cmd),
            weak_smoke=_run(root, "weak-smoke", weak_cmd, "--episodes", "2"),
            good=_run(root, "good", good_cmd),
            state=root / "state",
        )


def _doc(run: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run / "result.json").read_text())
    return doc


def _copy(run: Path, tmp: Path) -> Path:
    dest = tmp / "forged"
    shutil.copytree(run, dest)
    return dest


def _forge(run: Path, good: Path, *, swap_checkpoint: bool) -> None:
    """Rewrite ``run``'s result.json with the good run's numbers, as a forger would.

    The report is made internally consistent (metrics from the episodes, the
    score from the real scoring function, the submission hashes of the swapped
    file), so that nothing but the signed events contradicts it.
    """
    doc, genuine = _doc(run), _doc(good)
    result = doc["eval_result"]
    good_episodes = genuine["eval_result"]["episodes"]
    for mine, theirs in zip(result["episodes"], good_episodes, strict=False):
        for key in ("episode_return", "length", "terminated"):
            mine[key] = theirs[key]
    task = default_registry().get(TASK)
    result["metrics"] = summarize(
        [
            EpisodeOutcome(e["index"], e["episode_return"], e["length"], e["terminated"])
            for e in result["episodes"]
        ],
        (m.name for m in task.metrics),
    )
    report = score(task, result["metrics"], default_registry().target(TASK))
    doc["score"] = report.model_dump(mode="json")
    if len(result["episodes"]) == len(good_episodes):  # the full run: the good run's numbers
        assert result["metrics"] == genuine["eval_result"]["metrics"]
        assert doc["score"]["score"] == genuine["score"]["score"] > 1.0  # 1000 / 982.02
    if swap_checkpoint:
        shutil.copyfile(CHECKPOINT, run / "submission" / "policy.safetensors")
        sha = hashlib.sha256(CHECKPOINT.read_bytes()).hexdigest()
        result["submission_files"] = {"policy.safetensors": sha}
    (run / "result.json").write_text(json.dumps(doc, indent=2) + "\n")


def _trajectory_sha(run: Path) -> str:
    return hashlib.sha256((run / "trajectory.jsonl").read_bytes()).hexdigest()


def _failed(report: AuditReport) -> dict[str, str]:
    return {c.name: c.detail for c in report.checks if not c.ok}


def _signed_seq(run: Path, kind: str) -> int:
    """The file position of the run's (last) signed event of ``kind``."""
    seqs = [
        e["seq"]
        for e in map(json.loads, (run / "trajectory.jsonl").read_text().splitlines())
        if e["kind"] == kind and e["level"] == "trusted_evaluator"
    ]
    return int(seqs[-1])


def _cli(run: Path, secret_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "audit", str(run), "--secret", str(secret_file)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "500"},  # rich wraps table cells to the width
    )


def test_genuine_runs_audit_ok(runs: Runs) -> None:
    secret = read_secret(runs.secret_file)
    for run in (runs.weak, runs.weak_smoke, runs.good):
        report = audit_run(run, secret, workers=1)
        assert report.ok, (run.name, _failed(report))
        names = {c.name for c in report.checks}
        assert {"signed job", "signed submission", "signed result", "score"} <= names
        assert {"submission files", "metrics", "episodes"} <= names
    weak_score = next(
        c for c in audit_run(runs.weak, secret, workers=1).checks if c.name == "score"
    )
    assert weak_score.detail.startswith("scored, score 0.002")
    cli = _cli(runs.weak, runs.secret_file)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "audit OK" in cli.stdout


@pytest.mark.parametrize("which", ["weak", "weak_smoke"])
def test_swapped_checkpoint_with_a_forged_report_fails_naming_the_signed_events(
    runs: Runs, short_tmp: Path, which: str
) -> None:
    original = getattr(runs, which)
    run = _copy(original, short_tmp)
    before = _trajectory_sha(run)
    real_return = _doc(run)["eval_result"]["metrics"]["mean_return"]
    _forge(run, runs.good, swap_checkpoint=True)
    assert _trajectory_sha(run) == before  # the signed record is untouched
    forged = _doc(run)
    assert forged["eval_result"]["metrics"]["mean_return"] == 1000.0
    assert forged["score"]["score"] > 1.0  # what the genuine good run scores

    report = audit_run(run, read_secret(runs.secret_file), workers=1)
    failed = _failed(report)
    assert not report.ok
    received = f"the signed `submission_received` event #{_signed_seq(run, 'submission_received')}"
    result = f"the signed `result` event #{_signed_seq(run, 'result')}"
    assert received in failed["signed submission"]
    assert received in failed["submission files"]
    assert f"mean_return 1000.0 differs from {result}" in failed["signed result"]
    assert f"{result} (eval_seq" in failed["signed result"]
    assert repr(real_return) in failed["signed result"]
    assert "score 1.0" in failed["score"] and result in failed["score"]
    # the checks that hold still say so: the forgery did not touch seeds or the chain
    passed = {c.name for c in report.checks if c.ok}
    assert {"trajectory", "secret commitment", "seed commitments", "signed job"} <= passed

    cli = _cli(run, runs.secret_file)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "audit OK" not in cli.stdout
    assert "FAIL" in cli.stdout and result in cli.stdout and received in cli.stdout
    summary = cli.stdout.strip().splitlines()[-1]
    assert summary.startswith("audit FAILED: ")
    assert {"signed submission", "signed result", "submission files", "score"} <= set(
        summary.removeprefix("audit FAILED: ").split(", ")
    )


def test_forged_metrics_and_score_alone_fail_naming_the_result_event(
    runs: Runs, short_tmp: Path
) -> None:
    run = _copy(runs.weak, short_tmp)
    _forge(run, runs.good, swap_checkpoint=False)
    report = audit_run(run, read_secret(runs.secret_file), workers=1)
    failed = _failed(report)
    result = f"the signed `result` event #{_signed_seq(run, 'result')}"
    assert set(failed) == {"signed result", "episodes", "score"}, failed
    assert f"metrics mean_return 1000.0 differs from {result}" in failed["signed result"]
    assert "episode returns differ" in failed["signed result"]
    assert "differs from the re-run" in failed["episodes"]
    assert result in failed["score"]
    metrics = next(c for c in report.checks if c.name == "metrics")
    assert metrics.ok and result in metrics.detail  # the re-run is compared with the signed


def test_a_job_no_signed_event_mentions_fails_and_prints_as_text(
    runs: Runs, short_tmp: Path
) -> None:
    run = _copy(runs.weak, short_tmp)
    doc = _doc(run)
    doc["eval_result"]["job_id"] = "[/x]"  # rich markup would choke on it
    (run / "result.json").write_text(json.dumps(doc))
    failed = _failed(audit_run(run, read_secret(runs.secret_file), workers=1))
    assert "no signed evaluator event mentions" in failed["signed job"]
    assert "the signed `result` event of job '[/x]' is missing" in failed["signed result"]
    assert "not recomputed" in failed["score"]
    cli = _cli(run, runs.secret_file)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "Traceback" not in cli.stderr and "'[/x]'" in cli.stdout


def test_a_run_without_result_json_is_a_clear_failure(runs: Runs, short_tmp: Path) -> None:
    run = _copy(runs.weak, short_tmp)
    (run / "result.json").unlink()
    report = audit_run(run, read_secret(runs.secret_file), workers=1)
    assert not report.ok and report.fatal is not None
    assert "interrupted" in report.fatal
    assert [(c.name, c.ok) for c in report.checks] == [("result.json", False)]
    cli = _cli(run, runs.secret_file)
    assert cli.returncode == 2  # not a finished run: nothing to audit, a usage error
    assert "Traceback" not in cli.stderr
    lines = cli.stderr.strip().splitlines()
    assert lines == [
        f"error: no result.json in {run}: the run did not finish (or this is not a run directory)"
    ]
    assert not cli.stdout


def test_forged_interactive_episodes_fail_naming_the_episode_summary(
    runs: Runs, short_tmp: Path
) -> None:
    (short_tmp / "agent.py").write_text(INTERACTIVE_AGENT)
    genuine = _run(
        short_tmp,
        "run",
        f"{sys.executable} {short_tmp / 'agent.py'}",
        "--episodes",
        "2",
        task="td3-inverted-double-pendulum-v1",
    )
    secret = read_secret(short_tmp / "state" / "secret")
    report = audit_run(genuine, secret)
    assert report.ok, _failed(report)
    assert {"episodes", "metrics", "signed result", "score"} <= {c.name for c in report.checks}

    doc = _doc(genuine)
    forged = copy.deepcopy(doc)
    forged["eval_result"]["episodes"][0]["episode_return"] += 500.0
    (genuine / "result.json").write_text(json.dumps(forged))
    failed = _failed(audit_run(genuine, secret))
    summary_seqs = [
        e["seq"]
        for e in map(json.loads, (genuine / "trajectory.jsonl").read_text().splitlines())
        if e["kind"] == "episode_summary"
    ]
    index = doc["eval_result"]["episodes"][0]["index"]
    assert f"result.json episode {index} " in failed["episodes"]
    assert any(f"`episode_summary` event #{s}" in failed["episodes"] for s in summary_seqs)
    assert "`result` event #" in failed["signed result"]


REPRO_AGENT = """
import json
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
rng = np.random.default_rng(0)
rules = c.get_spec().contract.tensors
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype) for r in rules}
save_file(w, str(c.submission_dir / "policy.safetensors"))
meta = {"algorithm": "PPO", "training_steps": 3000, "seeds": [0], "final_eval_return": 12.5}
(c.submission_dir / "meta.json").write_text(json.dumps(meta))
(c.submission_dir / "curve.csv").write_text("step,eval_return\\n1000,3.0\\n2000,8.0\\n3000,12.5\\n")
c.wait(c.submit())
"""


def test_a_forged_gate_verdict_fails_the_recomputed_score(short_tmp: Path) -> None:
    """A reproduction run's gate is re-run on evidence rebuilt from the verified files."""
    (short_tmp / "agent.py").write_text(REPRO_AGENT)
    task_id = "td3-walker2d-repro-v1"
    run = _run(short_tmp, "run", f"{sys.executable} {short_tmp / 'agent.py'}", task=task_id)
    secret = read_secret(short_tmp / "state" / "secret")
    doc = _doc(run)
    assert doc["score"]["status"] == "gate_failed"  # PPO is not on the allow-list
    report = audit_run(run, secret, workers=1)
    assert report.ok, _failed(report)
    check = next(c for c in report.checks if c.name == "score")
    assert check.detail.startswith("gate_failed, score 0")
    assert "rebuilt from the verified submission files" in check.detail

    reg = default_registry()
    task = reg.get(task_id)
    passed = score(task, doc["eval_result"]["metrics"], reg.target(task_id)).model_dump(mode="json")
    passed.update(status="scored", score=passed["base_score"], gate=None)  # the gate "passed"
    doc["score"] = passed
    (run / "result.json").write_text(json.dumps(doc))
    failed = _failed(audit_run(run, secret, workers=1))
    assert list(failed) == ["score"], failed
    assert "status 'scored' vs 'gate_failed'" in failed["score"]
    assert "`result` event #" in failed["score"]


def test_a_forged_floor_fails_naming_the_result_event(runs: Runs, short_tmp: Path) -> None:
    """A lower floor makes a run look further from doing nothing: result.json's floor and the
    score's floor figures must be the signed ones."""
    run = _copy(runs.weak, short_tmp)
    doc = _doc(run)
    floor = doc["eval_result"]["floor"]
    assert floor is not None and floor["policy"] == "zero_output"
    floor["metrics"]["mean_return"] = 0.0
    floor["episode_returns"] = [0.0] * len(floor["episode_returns"])
    task = default_registry().get(TASK)
    report = ScoreReport.model_validate(doc["score"])
    forged = score(task, report.measured, default_registry().target(TASK)).with_floor(
        0.0, "zero_output"
    )
    assert forged.floor_normalized != report.floor_normalized
    doc["score"] = forged.model_dump(mode="json")
    (run / "result.json").write_text(json.dumps(doc, indent=2) + "\n")
    failed = _failed(audit_run(run, read_secret(runs.secret_file), workers=1))
    result = f"the signed `result` event #{_signed_seq(run, 'result')}"
    assert set(failed) == {"signed result", "score"}, failed
    assert "eval_result.floor differs from" in failed["signed result"]
    assert (
        result in failed["signed result"]
        and "episode_returns[0]: 0.0 vs " in failed["signed result"]
    )
    assert "floor 0.0 vs" in failed["score"]
