"""What ``result.json`` records for comparing runs (schema 3): times, label, submission
digest, versions and the official flag; older reports still load; ``--label`` checked.

Real ``ale-robotics run`` processes of the shipped TD3 checkpoint agent (~3 s each).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import check_label, default_label
from ale_robotics.harness.report import (
    SCHEMA_VERSION,
    RunReport,
    load_run_report,
    submission_sha256,
)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
AGENT = f"{sys.executable} {ROOT / 'examples/agents/submit_checkpoint.py'}"
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"


def _run(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "run",
            "td3-inverted-pendulum-v1",
            "--agent",
            AGENT,
            "--sandbox",
            "none",
            "--workers",
            "1",
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        check=False,
    )


def test_a_labelled_run_records_when_what_and_with_which_versions(tmp_path: Path) -> None:
    before = dt.datetime.now(dt.UTC)
    proc = _run(tmp_path, "--label", "td3-shipped")
    after = dt.datetime.now(dt.UTC)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "run" / "result.json").read_text())
    assert doc["schema_version"] == SCHEMA_VERSION == 6
    assert doc["label"] == "td3-shipped"
    started = dt.datetime.fromisoformat(doc["started_at"])
    ended = dt.datetime.fromisoformat(doc["ended_at"])
    assert doc["started_at"].endswith("Z") and started.utcoffset() == dt.timedelta(0)
    assert before <= started < ended <= after
    assert (ended - started).total_seconds() == pytest.approx(doc["wall_s"], abs=0.5)
    # the digest is over the files the evaluator evaluated: here the shipped checkpoint
    file_sha = hashlib.sha256(CHECKPOINT.read_bytes()).hexdigest()
    assert doc["eval_result"]["submission_files"] == {"policy.safetensors": file_sha}
    lines = f"policy.safetensors:{file_sha}\n".encode()
    assert doc["submission_sha256"] == hashlib.sha256(lines).hexdigest()
    assert doc["evaluator_version"] == doc["eval_result"]["evaluator_version"]
    assert doc["simulator_versions"] == doc["eval_result"]["simulator_versions"]
    assert doc["simulator_versions"]["mujoco"] != "not installed"
    assert doc["official"] is True
    first = json.loads((tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "run_started"
    assert first["payload"]["label"] == "td3-shipped"
    assert dt.datetime.fromisoformat(first["payload"]["started_at"]) == started
    report = load_run_report(tmp_path / "run" / "result.json")
    assert isinstance(report, RunReport) and report.started_at == started


def test_a_smoke_run_is_not_official_and_is_labelled_by_its_script(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--episodes", "2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "run" / "result.json").read_text())
    assert doc["smoke_run"] == {"episodes": 2, "of": 10}
    assert doc["official"] is False
    assert doc["label"] == "submit_checkpoint"  # no --label: the agent script's stem
    assert doc["submission_sha256"] is not None


def test_a_label_that_cannot_be_one_is_refused_before_anything_starts(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--label", "my agent/v2")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "--label 'my agent/v2'" in proc.stderr and "td3-baseline" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_result_json_has_one_version_and_derives_what_it_leaves_out(tmp_path: Path) -> None:
    """One ``schema_version``, at the top: neither the result nor the score carries one; the
    fields the harness leaves to the report's one rule are derived from the result."""
    assert _run(tmp_path).returncode == 0
    doc = json.loads((tmp_path / "run" / "result.json").read_text())
    assert [p for p, k, _ in _walk(doc) if k == "schema_version"] == [""]
    new = RunReport.model_validate(doc)
    for key in DERIVED:
        del doc[key]
    derived = RunReport.model_validate(doc)
    assert derived.official is True
    assert derived.submission_sha256 == new.submission_sha256 is not None
    assert derived.evaluator_version == new.evaluator_version
    assert derived.simulator_versions == new.simulator_versions
    # what a report says itself wins over what is derived
    assert RunReport.model_validate({**doc, "official": False}).official is False


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 7])
def test_result_json_of_another_version_is_refused_saying_so(tmp_path: Path, version: int) -> None:
    stopped = {"schema_version": version, "state": "interrupted", "run_id": "r", "task_id": "t"}
    stopped |= {"agent_cmd": "python x/agent_v2.py", "reason": "SIGINT", "phase": "agent"}
    stopped |= {"wall_s": 1.0, "label": "agent_v2"}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(stopped))
    with pytest.raises(
        ValidationError,
        match=f"has schema_version {version}; this ale-robotics reads schema_version 6",
    ):
        load_run_report(path)
    path.write_text(json.dumps({**stopped, "schema_version": 6}))
    assert load_run_report(path).label == "agent_v2"


DERIVED = ("submission_sha256", "evaluator_version", "simulator_versions", "official")


def _walk(node: object, path: str = "") -> list[tuple[str, str, object]]:
    """Every (path, key, value) of a JSON document."""
    out: list[tuple[str, str, object]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((path, k, v))
            out.extend(_walk(v, f"{path}.{k}" if path else k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_walk(v, f"{path}[{i}]"))
    return out


def test_the_submission_digest_is_of_the_sorted_name_and_hash_lines() -> None:
    files = {"b.bin": "22" * 32, "a.json": "11" * 32}
    expected = hashlib.sha256(f"a.json:{'11' * 32}\nb.bin:{'22' * 32}\n".encode()).hexdigest()
    assert submission_sha256(files) == expected
    assert submission_sha256(dict(reversed(list(files.items())))) == expected
    assert submission_sha256({"a.json": "11" * 32}) != expected
    assert submission_sha256({}) is None


@pytest.mark.parametrize(
    ("cmd", "label"),
    [
        ("python examples/agents/td3_train.py --x 1", "td3_train"),
        (".venv/bin/python3.11 -u examples/agents/submit_checkpoint.py", "submit_checkpoint"),
        ("python -m mypkg.agents.ppo --lr 3e-4", "ppo"),
        ("./bin/my-agent --fast", "my-agent"),
        ("FOO=1 env BAR=2 uv run python train.py", "train"),
        ("bash run_all.sh", "run_all"),
        ('python -c "print(1)"', "python"),
        ('python "my agent.py"', "my-agent"),
        ("", "agent"),
    ],
)
def test_the_default_label_is_what_the_agent_command_runs(cmd: str, label: str) -> None:
    assert default_label(cmd) == label
    assert check_label(default_label(cmd)) == label


@pytest.mark.parametrize("bad", ["", " x", "a b", "a/b", "-x", "x" * 65, "é"])
def test_check_label_refuses_what_cannot_name_a_run(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="letters, digits"):
        check_label(bad)


def test_the_results_page_names_the_schema_version_this_release_writes() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "results.md"
    assert f"top-level `schema_version` ({SCHEMA_VERSION})" in " ".join(page.read_text().split())
