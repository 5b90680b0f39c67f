"""Expired jobs nobody can take over (issue 31), on every engine: :meth:`fail_orphaned`.

Only RUNNING jobs whose lease ran out are shown to the caller's decision, each with
whether its run is open in the store; those it gives a reason for end FAILED
(infrastructure) with that reason, the others stay for the lease reaper. A job whose
owner renews it is never shown, nor a queued or finished one.
"""

from __future__ import annotations

import time

from stores import Backend

from ale_robotics.evaluator.store import ExpiredJob, JobStore, RunRecord
from ale_robotics.model.states import FailureSource, JobState

SHORT = 0.3


def _running(store: JobStore, token: str, run: str) -> str:
    job, _ = store.create(
        run_id=run, task_id="task-v1", client_token=token, episodes_total=1, files={}
    )
    claimed = store.claim_next(run_id=run)
    assert claimed is not None and claimed.job_id == job.job_id
    return job.job_id


def test_only_expired_running_jobs_are_shown_and_only_those_given_a_reason_fail(
    backend: Backend,
) -> None:
    dead = backend.open(owner="h:1:dead", lease_s=SHORT)
    live = backend.open(owner="h:2:live", lease_s=SHORT)
    observer = backend.open(owner="h:3:obs")
    assert dead.add_run(RunRecord("run-shared", "task-v1", "0" * 64, "", time.time()))
    orphan = _running(dead, "a", "run-embedded")
    shared = _running(dead, "b", "run-shared")
    renewed = _running(live, "c", "run-live")
    queued, _ = dead.create(
        run_id="run-q", task_id="task-v1", client_token="q", episodes_total=1, files={}
    )
    time.sleep(SHORT * 1.5)
    live.renew()  # its owner is alive: its lease runs again
    seen: list[ExpiredJob] = []

    def decide(job: ExpiredJob) -> str | None:
        seen.append(job)
        return None if job.run_open else "its evaluator died"

    ended = observer.fail_orphaned(decide)
    assert {j.job_id: (j.run_open, j.owner) for j in seen} == {
        orphan: (False, "h:1:dead"),
        shared: (True, "h:1:dead"),
    }
    assert [j.job_id for j in ended] == [orphan]
    row = observer.get(orphan)
    assert row is not None and row.state is JobState.FAILED
    assert (row.failure_source, row.failure_reason) == (
        FailureSource.INFRASTRUCTURE,
        "its evaluator died",
    )
    for job_id, state in ((shared, JobState.RUNNING), (renewed, JobState.RUNNING)):
        other = observer.get(job_id)
        assert other is not None and other.state is state
    assert observer.requeue_expired().requeued == [shared]  # left to the lease model
    q = observer.get(queued.job_id)
    assert q is not None and q.state is JobState.QUEUED
    assert observer.fail_orphaned(decide) == []  # nothing expired is left
