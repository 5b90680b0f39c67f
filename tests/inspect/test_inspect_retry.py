"""One ALE run per Inspect sample, whatever Inspect retries: a sample that errors after its
run started has that run scored as it stands, and retry_on_error, eval_retry and eval_set's
retries (in the same call and in a later call on the same log directory) report that run
instead of starting one on new hidden seeds; a run with no verdict is never replaced.

Each eval's solver submits the shipped pendulum checkpoint from a tool call (the agent
acted: its run has something to score), then fails the first time it runs, as a model
provider's failure would; a marker file says it has."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from inspect_ai import Task, eval_retry, eval_set
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sandbox

from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report
from ale_robotics.inspect import ale_task
from ale_robotics.inspect.retry import CLAIMS_DIR, SampleClaim
from ale_robotics.inspect.sandbox import AleSandboxEnvironment
from ale_robotics.trajectory import verify_file

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.slow,
]

PENDULUM = "td3-inverted-pendulum-v2"
SUBMIT_CHECKPOINT = "python $ALE_WORKSPACE/examples/agents/submit_checkpoint.py"
REPO = Path(__file__).resolve().parents[2]


@solver
def fails_once(marker: str, stop_run: bool = False) -> Solver:
    """Submits the checkpoint, then fails the first time (``stop_run``: after stopping the
    sample's run, as an operator's Ctrl-C of the harness would)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        result = await sandbox().exec(["bash", "-c", SUBMIT_CHECKPOINT])
        assert result.success, result.stderr
        if not Path(marker).exists():
            Path(marker).write_text("failed once\n")
            if stop_run:
                run = sandbox().as_type(AleSandboxEnvironment).run
                assert run is not None
                await anyio.to_thread.run_sync(run.abort)
            raise RuntimeError("the model provider failed (a test's)")
        return state

    return solve


def _task_args(tmp: Path) -> dict[str, Any]:
    return {
        "task_id": PENDULUM,
        "sandbox": "bwrap",
        "runs_root": str(tmp / "runs"),
        "settings": {"workspace": str(REPO), "state_dir": str(tmp / "state")},
    }


def _task(tmp: Path) -> Task:
    args = _task_args(tmp)
    return ale_task(args.pop("task_id"), **args)


def _runs(tmp: Path) -> list[RunReport | StoppedRunReport]:
    return [load_run_report(p) for p in sorted((tmp / "runs").glob("*/result.json"))]


def _the_one_scored_run(tmp: Path) -> RunReport:
    """The sample's only run: scored (1.018 for the checkpoint), its trajectory intact, and
    claimed for the sample."""
    [report] = _runs(tmp)
    assert isinstance(report, RunReport), report
    assert report.score.score is not None and round(report.score.score, 3) == 1.018
    run_dir = tmp / "runs" / report.run_id
    assert verify_file(run_dir / "trajectory.jsonl", expected_head=report.trajectory_head).ok
    [claim_file] = (tmp / "runs" / CLAIMS_DIR).glob("*.json")
    claim = SampleClaim.model_validate_json(claim_file.read_text())
    assert claim.run_id == report.run_id and claim.sample_id == PENDULUM and claim.epoch == 1
    return report


def _reported_again(log: EvalLog, run: RunReport) -> None:
    """The log's sample is scored with the first run's verdict, and says so."""
    assert log.status == "success", log.error
    assert log.samples is not None
    [sample] = log.samples
    assert sample.scores is not None
    score = sample.scores["ale_scorer"]
    assert score.value == run.score.score
    assert score.metadata is not None and score.metadata["run_id"] == run.run_id
    assert score.metadata["reported_again"] is True
    assert score.explanation is not None and "a retry starts no new run" in score.explanation


def test_retry_on_error_reports_the_first_run_instead_of_drawing_new_seeds(
    tmp_path: Path,
) -> None:
    [log] = inspect_eval(
        _task(tmp_path),
        solver=fails_once(str(tmp_path / "marker")),
        model="mockllm/model",
        retry_on_error=2,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    run = _the_one_scored_run(tmp_path)
    _reported_again(log, run)
    assert log.samples is not None and len(log.samples[0].error_retries or []) == 1
    # the first attempt's error scored the run as it stood (the agent had submitted)
    assert run.agent_exit_code == 0 and run.inspect is not None


def test_eval_retry_reports_the_first_run_even_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first eval in one directory with the default runs root (./runs), the retry in
    another: it still finds the sample's run."""
    first_dir, other_dir = tmp_path / "first", tmp_path / "other"
    first_dir.mkdir()
    other_dir.mkdir()
    task_args = _task_args(tmp_path)
    del task_args["runs_root"]
    monkeypatch.chdir(first_dir)
    [first] = inspect_eval(
        "ale_robotics/ale_task",
        task_args=task_args,
        solver=fails_once(str(tmp_path / "marker")),
        model="mockllm/model",
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert first.status == "error" and "model provider failed" in str(first.error)
    run = _the_one_scored_run(first_dir)  # scored already, before any retry
    monkeypatch.chdir(other_dir)
    [retried] = eval_retry(first, log_dir=str(tmp_path / "logs"), display="none")
    assert retried.eval.task_id == first.eval.task_id
    assert retried.eval.eval_id != first.eval.eval_id
    _reported_again(retried, run)
    assert _the_one_scored_run(first_dir) == run
    assert not (other_dir / "runs").exists()


def test_eval_set_retries_report_the_first_run(tmp_path: Path) -> None:
    """Its retry of a failed task in the same call (as it goes, and in the legacy batch
    mode), and in a later call on the log dir."""
    logs = tmp_path / "logs"
    ok, [header] = eval_set(
        [_task(tmp_path)],
        log_dir=str(logs),
        solver=fails_once(str(tmp_path / "marker")),
        model="mockllm/model",
        retry_attempts=1,
        display="none",
    )
    assert ok, header.error
    run = _the_one_scored_run(tmp_path)
    _reported_again(read_eval_log(header.location), run)

    batch = tmp_path / "batch"
    batch.mkdir()
    ok, [header] = eval_set(
        [_task(batch)],
        log_dir=str(batch / "logs"),
        solver=fails_once(str(batch / "marker")),
        model="mockllm/model",
        retry_attempts=2,  # counts the first attempt in this mode
        retry_immediate=False,
        retry_wait=0.1,
        display="none",
    )
    assert ok, header.error
    _reported_again(read_eval_log(header.location), _the_one_scored_run(batch))

    later = tmp_path / "later"
    later.mkdir()
    ok, _ = eval_set(
        [_task(later)],
        log_dir=str(later / "logs"),
        solver=fails_once(str(later / "marker")),
        model="mockllm/model",
        retry_attempts=0,
        display="none",
    )
    assert not ok
    run = _the_one_scored_run(later)
    ok, [header] = eval_set(
        [_task(later)],
        log_dir=str(later / "logs"),
        solver=fails_once(str(later / "marker")),
        model="mockllm/model",
        retry_attempts=1,
        display="none",
    )
    assert ok, header.error
    _reported_again(read_eval_log(header.location), run)


def test_a_retry_of_a_sample_whose_run_has_no_verdict_is_refused_saying_why(
    tmp_path: Path,
) -> None:
    [first] = inspect_eval(
        "ale_robotics/ale_task",
        task_args=_task_args(tmp_path),
        solver=fails_once(str(tmp_path / "marker"), stop_run=True),
        model="mockllm/model",
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert first.status == "error"
    [stopped] = _runs(tmp_path)
    assert isinstance(stopped, StoppedRunReport) and stopped.state == "interrupted"
    [retried] = eval_retry(first, log_dir=str(tmp_path / "logs"), display="none")
    assert retried.status == "error" and retried.error is not None
    message = retried.error.message
    assert f"already had its ALE run {stopped.run_id}" in message
    assert "was interrupted without a score" in message and "start a new eval" in message
    assert [r.run_id for r in _runs(tmp_path)] == [stopped.run_id]  # no second run
    assert json.loads((tmp_path / "runs" / stopped.run_id / "result.json").read_text())[
        "state"
    ] == ("interrupted")
