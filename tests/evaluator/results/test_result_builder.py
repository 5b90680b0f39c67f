"""The result builder (evaluator/results/builder.py): every EvalResult and ``result`` payload.

The signed ``result`` payloads are pinned key for key to what the evaluator has
always signed (the audit compares old and new runs' events), and EvalResult's
``state`` and ``failure_source`` are enums whose JSON is the strings stored
results have always had, so old results still read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.results.builder import ResultBuilder, Verdict, result_payload
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.result import EpisodeRecord, EvalResult, TrainingUsage
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.seeds import derive_seeds, new_secret
from ale_robotics.tasks import Registry, TaskSpec

SECRET_SHA = "ab" * 32
RUN = "run-builder-1"


def _job(task: TaskSpec, state: JobState = JobState.RUNNING, **kw: Any) -> JobRecord:
    fields: dict[str, Any] = {
        "job_id": "job-0123456789abcdef",
        "run_id": RUN,
        "task_id": task.id,
        "client_token": "t",
        "state": state,
        "episodes_done": 0,
        "episodes_total": task.eval.evaluated_episodes,
        "failure_source": FailureSource.NONE,
        "failure_reason": "",
        "heartbeat": 0.0,
        "created": 0.0,
        "updated": 0.0,
        "attempts": 2,
        "files": {"policy.safetensors": "cd" * 32},
        "result_json": None,
    }
    return JobRecord(**{**fields, **kw})


def _builder(registry: Registry, smoke_episodes: int | None = None) -> ResultBuilder:
    return ResultBuilder(TaskCatalog(registry, smoke_episodes=smoke_episodes), SECRET_SHA)


def _outcomes(n: int) -> list[EpisodeOutcome]:
    return [EpisodeOutcome(i, 10.0 + i, 5 + i, i % 2 == 0) for i in range(n)]


def _success(builder: ResultBuilder, task: TaskSpec) -> Verdict:
    job = _job(task)
    outcomes = _outcomes(3)
    return builder.batch_success(
        job,
        task,
        seeds=derive_seeds(task.eval.base_seeds, RUN, new_secret()),
        outcomes=outcomes,
        metrics={"mean_return": 11.0},
        evidence_files={},
        tensor_shapes={"w": [2, 3]},
        wall_s=2.0,
        env_steps=sum(o.length for o in outcomes),
        workers=4,
    )


def _session(builder: ResultBuilder, task: TaskSpec, failure: str | None) -> Verdict:
    episodes = [
        EpisodeRecord(
            index=i, seed_commitment="ef" * 32, episode_return=float(i), length=3, terminated=True
        )
        for i in range(2)
    ]
    return builder.eval_session(
        job_id="job-fedcba9876543210",
        run_id=RUN,
        task=task,
        episodes=episodes,
        metrics={} if failure else {"mean_return": 0.5},
        failure=failure,
        infrastructure=False,
        wall_s=0.0,
        env_steps=6,
        training=TrainingUsage(agent_steps=7),
    )


def _round_trip(result: EvalResult) -> dict[str, Any]:
    """The result's JSON, after checking it reads back equal (as the harness reads it)."""
    text = result.model_dump_json()
    assert EvalResult.model_validate_json(text) == result
    data: dict[str, Any] = json.loads(text)
    return data


# ------------------------------------------------------------- the payloads --


def test_payloads_of_jobs_that_ended_unmeasured_have_todays_keys() -> None:
    assert ResultBuilder.cancelled("j", "the run was closed") == {
        "job_id": "j",
        "state": "CANCELLED",
        "reason": "the run was closed",
    }
    assert ResultBuilder.timed_out("j", "past 900s") == {
        "job_id": "j",
        "state": "TIMED_OUT",
        "reason": "past 900s",
    }
    assert ResultBuilder.infrastructure_failure("j") == {
        "job_id": "j",
        "state": "FAILED",
        "failure_source": "infrastructure",
    }


def test_the_payload_keys_keep_their_order() -> None:
    payload = result_payload(
        "j",
        JobState.FAILED,
        smoke_run={"episodes": 1, "of": 2},
        episode_returns=[1.0],
        reason="why",
        failure_source=FailureSource.SUBMISSION,
    )
    assert list(payload) == [
        "job_id",
        "state",
        "failure_source",
        "reason",
        "episode_returns",
        "smoke_run",
    ]
    assert all(type(payload[k]) is str for k in ("state", "failure_source"))  # plain JSON


def test_a_batch_success(registry: Registry, task: TaskSpec) -> None:
    verdict = _success(_builder(registry), task)
    data = _round_trip(verdict.result)
    assert data["state"] == "SUCCEEDED" and data["failure_source"] == ""
    assert verdict.result.state is JobState.SUCCEEDED
    assert verdict.result.task_config_sha256 == registry.entry(task.id).sha256
    assert verdict.result.secret_sha256 == SECRET_SHA and verdict.result.attempts == 2
    assert verdict.result.timings is not None and verdict.result.timings.workers == 4
    assert verdict.result.timings.env_steps_per_s == verdict.result.timings.env_steps / 2.0
    assert verdict.result.smoke_run is None
    assert list(verdict.payload) == ["job_id", "state", "metrics", "episode_returns", "outcomes"]
    assert verdict.payload["state"] == "SUCCEEDED"
    assert verdict.payload["episode_returns"] == [10.0, 11.0, 12.0]
    assert verdict.result.outcomes is not None
    assert verdict.payload["outcomes"] == verdict.result.outcomes.model_dump(mode="json")
    json.dumps(verdict.payload)


def test_a_smoke_run_says_so_in_result_and_payload(registry: Registry, task: TaskSpec) -> None:
    verdict = _success(_builder(registry, smoke_episodes=2), task)
    assert verdict.result.smoke_run is not None
    assert list(verdict.payload)[-1] == "smoke_run"
    assert verdict.payload["smoke_run"] == verdict.result.smoke_run.model_dump()


def test_a_batch_failure_by_the_submission(registry: Registry, task: TaskSpec) -> None:
    verdict = _builder(registry, smoke_episodes=2).batch_failure(
        _job(task), task, "episode 3, step 7: NaN action"
    )
    data = _round_trip(verdict.result)
    assert (data["state"], data["failure_source"]) == ("FAILED", "submission")
    assert verdict.result.failure_source is FailureSource.SUBMISSION
    assert verdict.result.failure_reason == "episode 3, step 7: NaN action"
    assert verdict.payload == {
        "job_id": "job-0123456789abcdef",
        "state": "FAILED",
        "failure_source": "submission",
        "reason": "episode 3, step 7: NaN action",
    }  # no smoke_run, no episode_returns: as signed before


def test_eval_session_results(registry: Registry, task: TaskSpec) -> None:
    builder = _builder(registry, smoke_episodes=2)
    done = _session(builder, task, None)
    data = _round_trip(done.result)
    assert (data["state"], data["failure_source"], data["failure_reason"]) == ("SUCCEEDED", "", "")
    assert done.result.timings is not None and done.result.timings.env_steps_per_s == 0.0
    assert done.result.training == TrainingUsage(agent_steps=7) and done.result.attempts == 1
    assert list(done.payload) == ["job_id", "state", "metrics", "episode_returns", "smoke_run"]
    assert done.payload["episode_returns"] == [0.0, 1.0]
    failed = _session(builder, task, "an env failed")
    data = _round_trip(failed.result)
    assert (data["state"], data["failure_source"]) == ("FAILED", "submission")
    assert list(failed.payload) == [
        "job_id",
        "state",
        "failure_source",
        "reason",
        "episode_returns",
        "smoke_run",
    ]
    assert (failed.payload["failure_source"], failed.payload["reason"]) == (
        "submission",
        "an env failed",
    )


@pytest.mark.parametrize(
    ("state", "source", "reason"),
    [
        (JobState.REJECTED, FailureSource.SUBMISSION, "policy.safetensors: no symlinks"),
        (JobState.CANCELLED, FailureSource.NONE, "the run was closed"),
        (JobState.TIMED_OUT, FailureSource.INFRASTRUCTURE, "past the deadline"),
        (JobState.FAILED, FailureSource.INFRASTRUCTURE, "worker crashed"),
    ],
)
def test_the_result_of_a_job_that_stored_none(
    registry: Registry, task: TaskSpec, state: JobState, source: FailureSource, reason: str
) -> None:
    job = _job(task, state, failure_source=source, failure_reason=reason)
    result = _builder(registry).empty(job)
    data = _round_trip(result)
    assert (data["state"], data["failure_source"], data["failure_reason"]) == (
        state.value,
        source.value,
        reason,
    )
    assert result.submission_files == job.files and result.attempts == job.attempts
    assert result.host is None and result.timings is None and result.metrics == {}


def test_results_stored_with_plain_strings_still_read() -> None:
    """What every stored result holds: the states and sources as strings."""
    base = {
        "job_id": "j",
        "run_id": "r",
        "task_id": "t",
        "task_config_sha256": "0" * 64,
        "secret_sha256": "1" * 64,
        "evaluator_version": "0",
    }
    old = EvalResult.model_validate({**base, "state": "FAILED", "failure_source": "infrastructure"})
    assert old.state is JobState.FAILED and old.state == "FAILED"
    assert old.failure_source is FailureSource.INFRASTRUCTURE
    assert EvalResult.model_validate({**base, "state": "SUCCEEDED"}).failure_source == ""
    assert f"{old.state}/{old.failure_source}" == "FAILED/infrastructure"
    with pytest.raises(ValueError, match="state"):
        EvalResult.model_validate({**base, "state": "DONE"})
