"""``ale-robotics check-submission``: the evaluator's own contract checks, with no evaluator."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import CHECKPOINT, TASK_ID
from helpers import random_weights
from safetensors.numpy import save_file
from typer.testing import CliRunner

from ale_robotics.cli import check_cmd  # noqa: F401  (registers the command on app)
from ale_robotics.cli.main import app
from ale_robotics.tasks import TaskSpec

# no ALE_ENDPOINT: nothing here may need an evaluator
runner = CliRunner(env={"ALE_ENDPOINT": "", "ALE_TASK_ID": "", "ALE_SUBMISSION_DIR": ""})


def _good(tmp: Path) -> Path:
    d = tmp / "good"
    d.mkdir()
    shutil.copyfile(CHECKPOINT, d / "policy.safetensors")
    return d


def test_a_good_artifact_satisfies_the_contract(tmp_path: Path) -> None:
    d = _good(tmp_path)
    r = runner.invoke(app, ["check-submission", str(d), "--task", TASK_ID])
    assert r.exit_code == 0, r.output
    size = (d / "policy.safetensors").stat().st_size
    assert r.stdout.strip() == (
        f"ok: {d} satisfies the contract of {TASK_ID}: files policy.safetensors (policy, "
        f"{size} bytes)"
    )
    doc = json.loads(
        runner.invoke(app, ["check-submission", str(d), "--task", TASK_ID, "--json"]).stdout
    )
    assert doc["ok"] is True and doc["rejection"] is None and doc["task_id"] == TASK_ID
    assert [(f["name"], f["role"], f["format"], f["bytes"]) for f in doc["files"]] == [
        ("policy.safetensors", "policy", "safetensors", size)
    ]
    assert len(doc["files"][0]["sha256"]) == 64


def _missing_file(d: Path, task: TaskSpec) -> None:
    (d / "notes.txt").write_text("the policy is still training")


def _wrong_shape(d: Path, task: TaskSpec) -> None:
    w = random_weights(task)
    w["l1.weight"] = np.zeros((3, 3), dtype=w["l1.weight"].dtype)
    save_file(w, str(d / "policy.safetensors"))


def _empty(d: Path, task: TaskSpec) -> None:
    pass


def _misnamed_file(d: Path, task: TaskSpec) -> None:
    shutil.copyfile(CHECKPOINT, d / "policy.safetensor")
    (d / "notes.txt").write_text("trained 3k steps")


def _renamed_key(d: Path, task: TaskSpec) -> None:
    w = random_weights(task)
    w["fc1.weight"] = w.pop("l1.weight")
    save_file(w, str(d / "policy.safetensors"))


def _extra_key(d: Path, task: TaskSpec) -> None:
    w = random_weights(task)
    w["critic.weight"] = np.zeros((2, 2), dtype=np.float32)
    save_file(w, str(d / "policy.safetensors"))


_KEYS = "['l1.weight', 'l1.bias', 'l2.weight', 'l2.bias', 'l3.weight', 'l3.bias']"


@pytest.mark.parametrize(
    ("setup", "rule", "reason"),
    [
        (
            _missing_file,
            "required file",
            "policy.safetensors or policy.pt: missing; the contract requires one of "
            "['policy.pt', 'policy.safetensors'] (policy); it holds ['notes.txt'] "
            "(rule: required file)",
        ),
        (_wrong_shape, "tensor shape", "key 'l1.weight' has shape [3, 3]; the contract requires"),
        (
            _empty,
            "required file",
            "policy.safetensors or policy.pt: missing; the contract requires one of "
            "['policy.pt', 'policy.safetensors'] (policy); the submission directory is empty",
        ),
        # Issue 48.9: what was found, not only what was expected.
        (
            _misnamed_file,
            "required file",
            "(policy); it holds ['notes.txt', 'policy.safetensor']; misnamed? "
            "'policy.safetensor' for 'policy.safetensors' (rule: required file)",
        ),
        (
            _renamed_key,
            "required keys",
            "policy.safetensors: missing key(s) ['l1.weight'] and unexpected key(s) "
            f"['fc1.weight'] (renamed? 'fc1.weight' for 'l1.weight'); the contract's keys: {_KEYS}",
        ),
        (
            _extra_key,
            "no extra keys",
            "policy.safetensors: unexpected key(s) ['critic.weight']; the contract's keys: "
            f"{_KEYS}",
        ),
    ],
    ids=[
        "missing-file",
        "wrong-tensor-shape",
        "empty-dir",
        "misnamed-file",
        "renamed-key",
        "extra",
    ],
)
def test_a_bad_artifact_gets_the_evaluators_reason(
    tmp_path: Path,
    task: TaskSpec,
    setup: Callable[[Path, TaskSpec], None],
    rule: str,
    reason: str,
) -> None:
    d = tmp_path / "sub"
    d.mkdir()
    setup(d, task)
    r = runner.invoke(app, ["check-submission", str(d), "--task", TASK_ID])
    assert r.exit_code == 1, r.output
    assert r.stdout.startswith(f"rejected: {d} does not satisfy the contract of {TASK_ID}: ")
    assert reason in r.stdout and f"(rule: {rule})" in r.stdout
    doc = json.loads(
        runner.invoke(app, ["check-submission", str(d), "--task", TASK_ID, "--json"]).stdout
    )
    assert doc["ok"] is False and doc["rejection"]["rule"] == rule
    assert reason in doc["rejection"]["reason"]


def test_defaults_come_from_the_agent_environment(tmp_path: Path) -> None:
    d = _good(tmp_path)
    env = {"ALE_SUBMISSION_DIR": str(d), "ALE_TASK_ID": TASK_ID}
    r = runner.invoke(app, ["check-submission"], env=env)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"ok: {d} satisfies the contract of {TASK_ID}")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--task", TASK_ID, "{tmp}/absent"], "does not exist"),
        (["--task", TASK_ID, "{tmp}/good/policy.safetensors"], "is not a directory"),
        (["{tmp}/good"], "pass --task TASK_ID (or set ALE_TASK_ID)"),
        (["--task", "td3-hopper-v1", "{tmp}/good"], "td3-hopper-v1 is interactive"),
        (["--task", "td3-pendulum-v1", "{tmp}/good"], "unknown task 'td3-pendulum-v1'"),
    ],
    ids=["missing-dir", "a-file", "no-task", "interactive-task", "unknown-task"],
)
def test_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    _good(tmp_path)
    r = runner.invoke(app, ["check-submission", *(a.format(tmp=tmp_path) for a in args)])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and expected in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stdout == ""
