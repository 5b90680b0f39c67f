"""``submit`` and ``status`` against a real evaluator: local path checks, exit codes, JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import CHECKPOINT, TASK_ID, cli
from typer.testing import CliRunner

from ale_robotics.client import AleClient
from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.evaluator import RunningEvaluator

RUN = "run-test-1"  # the run the conftest evaluator is bound to


def _env(ev: RunningEvaluator) -> dict[str, str]:
    volume = ev.evaluator.config.submission_volume
    assert volume is not None
    return {
        "ALE_ENDPOINT": ev.agent_address,
        "ALE_TOKEN": ev.agent_token,
        "ALE_TASK_ID": TASK_ID,
        "ALE_RUN_ID": RUN,
        "ALE_SUBMISSION_DIR": str(volume),
    }


def _volume(ev: RunningEvaluator) -> Path:
    volume = ev.evaluator.config.submission_volume
    assert volume is not None
    return volume


def _no_job_yet(ev: RunningEvaluator) -> None:
    with AleClient.from_env(_env(ev)) as client, pytest.raises(NotFoundError):
        client.status()


def test_submit_refuses_a_missing_path_a_file_and_an_empty_dir_without_a_job(
    evaluator: RunningEvaluator,
) -> None:
    from ale_robotics.cli.main import app

    volume = _volume(evaluator)
    (volume / "policy.safetensors").write_bytes(b"x")
    (volume / "empty").mkdir()
    runner = CliRunner(env=_env(evaluator))
    for path, expected in (
        ("absent", "does not exist"),
        ("policy.safetensors", "is not a directory: submit the directory that holds the files"),
        ("empty", "is empty: write the files the task's contract names first"),
    ):
        result = runner.invoke(app, ["submit", path])
        assert result.exit_code == 2, (path, result.output, result.exception)
        assert result.stderr.startswith("error: ") and expected in result.stderr, result.stderr
        assert "nothing was submitted" in result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    # the SDK refuses too, before any call: no job, no quota used
    with AleClient.from_env(_env(evaluator)) as client:
        for path in ("absent", "policy.safetensors", "empty"):
            with pytest.raises(InvalidArgumentError, match="nothing was submitted"):
                client.submit(path)
    _no_job_yet(evaluator)


def test_submit_wait_exits_1_when_the_job_is_rejected_and_status_is_unwrapped(
    evaluator: RunningEvaluator,
) -> None:
    (_volume(evaluator) / "notes.txt").write_text("no policy file in here")
    r = cli("submit", "--wait", "--json", env=_env(evaluator), columns=80)
    assert r.returncode == 1, r.stdout + r.stderr
    assert len(r.stdout.splitlines()) == 1  # one document: the job id and its final state
    doc = json.loads(r.stdout)
    assert doc["job_id"].startswith("job-") and doc["state"] == "REJECTED"
    assert doc["failure_source"] == "submission" and "required file" in doc["failure_reason"]
    assert f"error: job {doc['job_id']} ended REJECTED [submission]: " in r.stderr
    # status: one unwrapped JSON line at 80 columns, though the reason is longer
    assert len(json.dumps(doc)) > 80
    st = cli("status", env=_env(evaluator), columns=80)
    assert st.returncode == 0, st.stderr
    assert len(st.stdout.splitlines()) == 1
    assert json.loads(st.stdout) == doc
    assert json.loads(cli("status", "--json", doc["job_id"], env=_env(evaluator)).stdout) == doc


def test_submit_wait_prints_the_job_id_then_its_status(evaluator: RunningEvaluator) -> None:
    shutil.copyfile(CHECKPOINT, _volume(evaluator) / "policy.safetensors")
    r = cli("submit", "--wait", env=_env(evaluator), columns=80)
    assert r.returncode == 0, r.stdout + r.stderr
    job_id, status = r.stdout.splitlines()
    doc = json.loads(status)
    assert doc["job_id"] == job_id and doc["state"] == "SUCCEEDED"
    assert doc["episodes_done"] == doc["episodes_total"] > 0
