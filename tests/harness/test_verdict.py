"""The harness reads the evaluator's result or fails the run saying why (harness/verdict.py)."""

from __future__ import annotations

import json

import pytest

from ale_robotics.harness.verdict import read_eval_result
from ale_robotics.sandboxes.errors import HarnessError

RESULT = {
    "job_id": "job-0123456789abcdef",
    "run_id": "run-1",
    "task_id": "td3-inverted-pendulum-v2",
    "task_config_sha256": "0" * 64,
    "state": "SUCCEEDED",
    "secret_sha256": "1" * 64,
    "evaluator_version": "0.5.0.dev0",
}


def test_a_result_of_this_release_is_read() -> None:
    assert read_eval_result(json.dumps(RESULT)).job_id == RESULT["job_id"]


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({**RESULT, "schema_version": 2}, "schema_version"),  # an evaluator image from before
        ({k: v for k, v in RESULT.items() if k != "state"}, "state"),
    ],
)
def test_a_result_of_another_release_fails_the_run_saying_what_to_do(
    doc: dict[str, object], where: str
) -> None:
    with pytest.raises(HarnessError, match=rf"\({where}: .*'make images'") as err:
        read_eval_result(json.dumps(doc))
    assert "Traceback" not in str(err.value) and "pydantic" not in str(err.value)
