"""The host's load in every EvalResult (issue 27): 1/5/15-minute load averages at the job's
start and end, beside the CPU count, so a reader can tell a loaded host's wall-clock times."""

from __future__ import annotations

import os
from typing import Any

from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.results.builder import ResultBuilder, host_info
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.model.result import EvalResult
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.tasks import Registry


def _job(task_id: str, job_id: str) -> JobRecord:
    fields: dict[str, Any] = {
        "job_id": job_id,
        "run_id": "run-load-1",
        "task_id": task_id,
        "client_token": "t",
        "state": JobState.RUNNING,
        "episodes_done": 0,
        "episodes_total": 10,
        "failure_source": FailureSource.NONE,
        "failure_reason": "",
        "heartbeat": 0.0,
        "created": 0.0,
        "updated": 0.0,
        "attempts": 1,
        "files": {},
        "result_json": None,
    }
    return JobRecord(**fields)


def test_a_result_records_the_load_at_its_jobs_start_and_end(registry: Registry) -> None:
    builder = ResultBuilder(TaskCatalog(registry), "ab" * 32)
    task = registry.get("td3-hopper-v1")
    started, unstarted = _job(task.id, "job-started00000001"), _job(task.id, "job-unstarted000001")
    builder.job_started(started.job_id)
    result = builder.batch_failure(started, task, "a non-finite action").result
    load = result.host.load
    assert load is not None and load.start is not None
    assert len(load.start) == len(load.end) == 3 and all(x >= 0 for x in load.end)
    assert result.host.cpu_count == os.cpu_count()
    assert EvalResult.model_validate_json(result.model_dump_json()) == result
    # a job the builder was not told of (or a second result of one) has no start, only the end
    for job in (unstarted, started):
        again = builder.batch_failure(job, task, "a non-finite action").result.host.load
        assert again is not None and again.start is None and len(again.end) == 3


def test_results_stored_before_the_load_was_recorded_still_read() -> None:
    data = host_info().model_dump(mode="json")
    del data["load"]
    assert type(host_info()).model_validate(data).load is None
