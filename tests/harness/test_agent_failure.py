"""``RunReport.agent_failure``: what ``run --strict`` and ``eval-set --strict`` exit 1 for.

An agent that ended in error (a non-zero exit, or stopped at a limit) without submitting
is still scored (0, its fault); the property says how it ended, for the message. An
agent that submitted, whatever its exit code, or that exited 0, did not fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.harness.report import RunReport
from ale_robotics.model.result import EvalResult
from ale_robotics.scoring import score
from ale_robotics.tasks import default_registry

DATA = Path(__file__).parent / "data" / "plot_results.json"


def _report(*, submitted: bool, **agent: Any) -> RunReport:
    entry = json.loads(DATA.read_text(encoding="utf-8"))["return"]
    result = EvalResult.model_validate(entry["eval_result"])
    task = default_registry().get(result.task_id)
    fields: dict[str, Any] = {"agent_exit_code": 0, "agent_budget_exceeded": False, **agent}
    return RunReport(
        run_id="run-strict",
        task_id=task.id,
        agent_cmd="python agent.py",
        budget_s=60.0,
        wall_s=1.0,
        job_state=result.state if submitted else "NO_SUBMISSION",
        eval_result=result if submitted else None,
        score=score(task, {}, None, no_result="for the test"),
        **fields,
    )


@pytest.mark.parametrize(
    ("agent", "failure"),
    [
        ({"agent_exit_code": 2}, "exited with code 2"),
        ({"agent_exit_code": -9}, "exited with code -9"),
        ({"agent_exit_code": None, "agent_budget_exceeded": True}, "ran past its budget"),
        (
            {"agent_exit_code": -9, "agent_disk_quota_exceeded": True},
            "went over its disk quota",
        ),
        ({"agent_exit_code": None}, "was stopped"),
        ({"agent_exit_code": 0}, None),  # exited cleanly without submitting: scored 0
    ],
)
def test_an_agent_that_did_not_submit(agent: dict[str, Any], failure: str | None) -> None:
    assert _report(submitted=False, **agent).agent_failure == failure


@pytest.mark.parametrize("code", [0, 1, None])
def test_an_agent_that_submitted_did_not_fail_whatever_its_exit(code: int | None) -> None:
    assert _report(submitted=True, agent_exit_code=code).agent_failure is None
