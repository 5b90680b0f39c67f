"""Inspect AI evals of ALE tasks, end to end: Inspect's own ``mockllm/model`` scripted with
tool calls, Inspect's ReAct agent and tools, the ``ale`` sandbox (each sample a real ALE
run in bubblewrap, with a real evaluator on hidden seeds), the scorer, the Inspect log,
``result.json`` and ``ale-robotics runs list``."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task, eval_set
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sandbox

from ale_robotics.inspect import ale_task
from ale_robotics.trajectory import verify_file

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

PENDULUM = "td3-inverted-pendulum-v2"
SUBMIT_CHECKPOINT = "python $ALE_WORKSPACE/examples/agents/submit_checkpoint.py"
REPO = Path(__file__).resolve().parents[2]


def _outputs(*calls: tuple[str, dict[str, Any]]) -> list[ModelOutput]:
    """The model's turns: each a tool call, then ``submit`` (ReAct's end of the sample).
    Token usage is given, so that mockllm counts none itself (that would need a download)."""
    outs = [ModelOutput.for_tool_call("mockllm/model", name, args) for name, args in calls]
    outs.append(ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "done"}))
    for out in outs:
        out.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    return outs


def _bash(command: str) -> tuple[str, dict[str, Any]]:
    return "bash", {"command": command}


def _eval(task: Task, outputs: list[ModelOutput], logs: Path) -> EvalLog:
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = inspect_eval(task, model=model, log_dir=str(logs), display="none", max_samples=1)
    return log


def _tool_outputs(log: EvalLog) -> list[str]:
    assert log.samples is not None
    return [m.text for m in log.samples[0].messages if m.role == "tool"]


def _score(log: EvalLog) -> Score:
    assert log.samples is not None and log.samples[0].scores is not None
    return log.samples[0].scores["ale_scorer"]


def _run_dir(log: EvalLog) -> Path:
    meta = _score(log).metadata
    assert meta is not None
    return Path(meta["run_dir"])


def _result(log: EvalLog) -> dict[str, Any]:
    return json.loads((_run_dir(log) / "result.json").read_text())


def _task(tmp: Path, task_id: str = PENDULUM, **kwargs: Any) -> Task:
    settings = {
        "workspace": str(REPO),
        "state_dir": str(tmp / "state"),
        **kwargs.pop("settings", {}),
    }
    return ale_task(
        task_id, sandbox="bwrap", runs_root=str(tmp / "runs"), settings=settings, **kwargs
    )


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, EvalLog]:
    """One eval: the shipped pendulum checkpoint submitted from a bash tool call."""
    tmp = tmp_path_factory.mktemp("inspect")
    log = _eval(_task(tmp), _outputs(_bash(SUBMIT_CHECKPOINT)), tmp / "logs")
    return tmp, log


def test_the_shipped_checkpoint_submitted_from_a_tool_call_scores_1018(
    pendulum: tuple[Path, EvalLog],
) -> None:
    tmp, log = pendulum
    assert log.status == "success", log.error
    score = _score(log)
    assert isinstance(score.value, float) and round(score.value, 3) == 1.018
    assert score.explanation is not None and "Score 1.018" in score.explanation
    meta = score.metadata or {}
    assert meta["official"] is True and meta["status"] == "scored"
    assert meta["metrics"]["mean_return"] == 1000.0 and meta["target"] == 982.02
    assert meta["target_source"]["paper"].startswith("Fujimoto")
    # the Inspect log, read back from disk, says the same
    on_disk = read_eval_log(log.location)
    assert on_disk.results is not None
    assert round(on_disk.results.scores[0].metrics["mean"].value, 3) == 1.018

    report = _result(log)
    assert report["score"]["score"] == score.value and report["label"] == "mockllm-model"
    assert report["inspect"]["model"] == "mockllm/model"
    assert report["inspect"]["log"] == log.location and Path(log.location).exists()
    assert report["inspect"]["epoch"] == 1 and report["inspect"]["sample_id"] == PENDULUM
    assert report["sandbox"] == "bwrap"

    listed = subprocess.run(
        [sys.executable, "-m", "ale_robotics", "runs", "list", str(tmp / "runs"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [run] = json.loads(listed.stdout)["runs"]
    assert run["run_id"] == meta["run_id"] and round(run["score"], 3) == 1.018
    assert run["label"] == "mockllm-model" and run["official"] is True
    assert run["inspect"]["model"] == "mockllm/model" and run["inspect"]["log"] == log.location


def test_each_model_and_tool_call_is_a_trajectory_event_with_digests(
    pendulum: tuple[Path, EvalLog],
) -> None:
    _, log = pendulum
    report = _result(log)
    trajectory = _run_dir(log) / "trajectory.jsonl"
    assert verify_file(trajectory, expected_head=report["trajectory_head"]).ok
    events = [json.loads(line) for line in trajectory.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    model_calls = [e["payload"] for e in events if e["kind"] == "inspect_model_call"]
    tool_calls = [e["payload"] for e in events if e["kind"] == "inspect_tool_call"]
    assert [c["call"] for c in model_calls] == [0, 1]  # the bash turn and the submit turn
    assert [c["function"] for c in tool_calls] == ["bash", "submit"]
    assert all(len(c["input_sha256"]) == 64 and c["model"] == "mockllm/model" for c in model_calls)
    assert all(len(c["arguments_sha256"]) == 64 for c in tool_calls)
    assert model_calls[0]["tokens_in"] == 100
    # recorded while the agent phase was on, before the run's end
    assert kinds.index("inspect_model_call") < kinds.index("agent_exited") < kinds.index("score")


def test_the_runs_model_usage_is_inspects_account_of_the_sample(
    pendulum: tuple[Path, EvalLog],
) -> None:
    """result.json's model_usage for an Inspect run: the sample's calls and tokens per
    model as Inspect counted them (its log's sample model_usage), beside the score."""
    _, log = pendulum
    usage = _result(log)["model_usage"]
    assert log.samples is not None
    inspect_usage = log.samples[0].model_usage["mockllm/model"]
    assert (inspect_usage.input_tokens, inspect_usage.output_tokens) == (200, 20)
    assert usage["per_model"] == {"mockllm/model": {"calls": 2, "tokens_in": 200, "tokens_out": 20}}
    assert (usage["calls"], usage["tokens_in"], usage["tokens_out"]) == (2, 200, 20)
    assert usage["transcript"] == log.location and usage["budget_tokens"] is None
    assert "[model: 2 calls, 220 tokens]" in (_score(log).metadata or {})["score_line"]


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    yield port
    server.close()


def test_tool_calls_cannot_reach_another_run_the_network_the_harness_or_the_secret(
    pendulum: tuple[Path, EvalLog], tmp_path: Path, loopback_server: int
) -> None:
    tmp, first = pendulum
    other = Path(_result(first)["run_id"])
    other_dir = tmp / "runs" / other
    assert (other_dir / "result.json").exists()
    attempts = [
        _bash(f"cat {other_dir}/result.json && echo LEAK-RUN || echo BLOCKED-RUN"),
        _bash(f"ls {tmp / 'runs'} | grep -c {other} && echo LEAK-ROOT || echo BLOCKED-ROOT"),
        _bash(
            "python -c \"import socket; socket.create_connection(('127.0.0.1', "
            f'{loopback_server}), 3)" && echo LEAK-NET || echo BLOCKED-NET'
        ),
        _bash(
            'd=$(dirname "$(dirname "${ALE_ENDPOINT#unix://}")"); ls "$d"/harness.sock'
            " && echo LEAK-HARNESS || echo BLOCKED-HARNESS"
        ),
        _bash(f"cat {tmp / 'state'}/secret && echo LEAK-SECRET || echo BLOCKED-SECRET"),
    ]
    log = _eval(_task(tmp), _outputs(*attempts), tmp_path / "logs")
    outputs = "\n".join(_tool_outputs(log))
    for what in ("RUN", "ROOT", "NET", "HARNESS", "SECRET"):
        assert f"BLOCKED-{what}" in outputs and f"LEAK-{what}" not in outputs, outputs
    secret = (tmp / "state" / "secret").read_bytes().hex()
    assert secret not in outputs
    # the attempts submitted nothing: the run is scored, at 0
    report = _result(log)
    assert report["job_state"] == "NO_SUBMISSION" and report["score"]["score"] == 0.0


def test_a_budget_overrun_ends_the_sample_with_the_run_stopped_and_says_so(
    tmp_path: Path,
) -> None:
    task = _task(tmp_path, budget_s=3.0)
    log = _eval(task, _outputs(_bash("sleep 60"), _bash("echo never")), tmp_path / "logs")
    assert log.status == "success", log.error
    assert log.samples is not None
    sample = log.samples[0]
    score = _score(log)
    assert score.value == 0.0
    assert score.explanation is not None and "budget" in score.explanation
    report = _result(log)
    assert report["agent_budget_exceeded"] is True and report["job_state"] == "NO_SUBMISSION"
    # the second command never ran: the sample ended at the overrun
    assert not any("never" in t for t in _tool_outputs(log))
    assert sample.limit is not None and "agent phase is over" in sample.limit.reason


def test_an_interactive_task_driven_from_a_tool_call_scores_as_through_run(
    tmp_path: Path,
) -> None:
    """The agent of tests/harness/test_run_interactive.py, run by a python tool call: its
    eval episodes match a local replay of its policy on the run's hidden seeds, as they do
    when `ale-robotics run` starts it."""
    from harness.test_run_interactive import AGENT, POLICY, TASK, _replay

    from ale_robotics.audit import audit_run
    from ale_robotics.evaluator.batch.pipeline import summarize

    code = POLICY + AGENT.replace("STOP_AFTER", "1000")
    log = _eval(_task(tmp_path, TASK), _outputs(("python", {"code": code})), tmp_path / "logs")
    assert log.status == "success", log.error
    assert "episodes: 10 complete: True" in _tool_outputs(log)[0]
    report = _result(log)
    official = report["eval_result"]
    assert report["job_state"] == "SUCCEEDED" and official["official"] is True
    secret = (tmp_path / "state" / "secret").read_bytes()
    local = _replay(report["run_id"], secret)
    assert [e["episode_return"] for e in official["episodes"]] == [o.ret for o in local]
    assert official["metrics"] == summarize(local)
    assert _score(log).value == report["score"]["score"] and report["score"]["status"] == "scored"
    assert audit_run(_run_dir(log), secret).ok


def test_eval_set_runs_each_task_and_epoch_as_a_run_of_its_own(tmp_path: Path) -> None:
    """Two tasks, two epochs: four runs, each with its own run id and hidden seeds
    (smoke runs of 2 episodes, to keep it short)."""
    tasks = [
        _task(tmp_path, PENDULUM, episodes=2),
        _task(tmp_path, "td3-inverted-double-pendulum-v1", episodes=2),
    ]
    outputs = [out for _ in range(4) for out in _outputs(_bash(SUBMIT_CHECKPOINT))]
    model = get_model("mockllm/model", custom_outputs=outputs)
    ok, logs = eval_set(
        tasks,
        log_dir=str(tmp_path / "logs"),
        model=model,
        epochs=2,
        max_tasks=1,
        max_samples=1,
        display="none",
        retry_attempts=0,
    )
    assert ok and len(logs) == 2
    reports = [json.loads(p.read_text()) for p in sorted((tmp_path / "runs").glob("*/result.json"))]
    assert len(reports) == 4 and len({r["run_id"] for r in reports}) == 4
    assert sorted((r["task_id"], r["inspect"]["epoch"]) for r in reports) == [
        ("td3-inverted-double-pendulum-v1", 1),
        ("td3-inverted-double-pendulum-v1", 2),
        (PENDULUM, 1),
        (PENDULUM, 2),
    ]
    pendulum = [r for r in reports if r["task_id"] == PENDULUM]
    assert all(r["smoke_run"]["episodes"] == 2 and not r["official"] for r in pendulum)
    assert all(r["job_state"] == "SUCCEEDED" for r in pendulum)
    seeds = [tuple(e["seed_commitment"] for e in r["eval_result"]["episodes"]) for r in pendulum]
    assert seeds[0] != seeds[1]  # each epoch its own hidden seeds
    for header in logs:
        log = read_eval_log(header.location)  # eval_set returns the logs' headers
        assert log.status == "success" and log.samples is not None
        assert sorted(s.epoch for s in log.samples) == [1, 2]
        assert {
            r["inspect"]["log"] for r in reports if r["inspect"]["eval_id"] == log.eval.eval_id
        } == {log.location}


def test_the_task_by_its_registered_name_with_the_default_agents_text_editor(
    tmp_path: Path,
) -> None:
    """`ale_robotics/ale_task` as the inspect CLI names it (the package's inspect_ai entry
    point), with the default ReAct agent: its text editor writes inside the run's sandbox
    (a private /tmp), where bash reads it back; nothing lands on the host."""
    note = f"/tmp/ale-inspect-note-{tmp_path.name}.txt"
    outputs = _outputs(
        (
            "text_editor",
            {"command": "create", "path": note, "file_text": "hello from the editor\n"},
        ),
        _bash(f"cat {note}"),
    )
    model = get_model("mockllm/model", custom_outputs=outputs)
    settings = {"workspace": str(REPO), "state_dir": str(tmp_path / "state")}
    [log] = inspect_eval(
        "ale_robotics/ale_task",
        task_args={
            "task_id": PENDULUM,
            "sandbox": "bwrap",
            "runs_root": str(tmp_path / "runs"),
            "settings": settings,
        },
        model=model,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    created, read_back = _tool_outputs(log)[:2]
    assert "created successfully" in created and "hello from the editor" in read_back
    assert not Path(note).exists()
    assert _result(log)["inspect"]["task"] == PENDULUM


def test_a_sample_that_errors_has_its_run_scored_as_it_stands(tmp_path: Path) -> None:
    """A solver error after the agent acted: the sample errors, and its run ends in the
    sandbox's cleanup as an agent that exits does: evaluated, scored, recorded."""

    @solver
    def breaks() -> Solver:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            result = await sandbox().exec(["bash", "-c", SUBMIT_CHECKPOINT])
            assert result.success, result.stderr
            raise RuntimeError("the solver broke")

        return solve

    task = _task(tmp_path, solver=breaks())
    log = _eval(task, [], tmp_path / "logs")
    assert log.status == "error" and "the solver broke" in str(log.error)
    [report_path] = (tmp_path / "runs").glob("*/result.json")
    report = json.loads(report_path.read_text())
    assert report["state"] == "completed" and round(report["score"]["score"], 3) == 1.018
    assert report["inspect"]["model"] == "mockllm/model" and report["agent_exit_code"] == 0
    assert report["model_usage"]["calls"] == 0  # the solver asked no model
    assert verify_file(
        report_path.parent / "trajectory.jsonl", expected_head=report["trajectory_head"]
    ).ok


def test_a_tool_call_the_agent_makes_fail_is_the_models_tool_error(tmp_path: Path) -> None:
    """Calls whose arguments fail (a NUL byte in a command, a missing file) come back to the
    model as tool errors: the sample goes on, submits, and is scored (every other failure:
    test_tool_errors.py)."""
    log = _eval(
        _task(tmp_path),
        _outputs(
            _bash("echo before\x00after"),
            ("text_editor", {"command": "view", "path": "/no/such/file.txt"}),
            _bash(SUBMIT_CHECKPOINT),
        ),
        tmp_path / "logs",
    )
    assert log.status == "success", log.error
    assert log.samples is not None
    tools = [m for m in log.samples[0].messages if m.role == "tool"]
    assert tools[0].error is not None and "null byte" in tools[0].error.message
    assert tools[1].error is not None and "/no/such/file.txt" in tools[1].error.message
    score = _score(log)
    assert isinstance(score.value, float) and round(score.value, 3) == 1.018


def test_inspects_own_time_limit_ends_a_long_command_and_the_run_is_still_scored(
    tmp_path: Path,
) -> None:
    """Inspect's --time-limit cancels the sample while a tool's command runs: the sample does
    not wait for the command, and the scorer still ends and scores the run."""
    model = get_model("mockllm/model", custom_outputs=_outputs(_bash("sleep 120")))
    [log] = inspect_eval(
        _task(tmp_path),
        model=model,
        log_dir=str(tmp_path / "logs"),
        display="none",
        time_limit=8,
    )
    assert log.status == "success", log.error
    assert log.samples is not None and log.samples[0].limit is not None
    assert log.samples[0].limit.type == "time"
    assert log.samples[0].total_time is not None and log.samples[0].total_time < 60
    report = _result(log)
    assert report["job_state"] == "NO_SUBMISSION" and report["score"]["score"] == 0.0
    assert report["agent_budget_exceeded"] is False
