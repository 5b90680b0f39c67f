from __future__ import annotations

import time
from pathlib import Path

import pytest

from ale_robotics.evaluator.store import FailureSource, JobState, JobStore


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    s = JobStore(tmp_path / "jobs.sqlite3")
    yield s
    s.close()


def _new(store: JobStore, token: str = "t", run: str = "r1"):
    return store.create(
        run_id=run, task_id="task-v1", client_token=token, episodes_total=10, files={"p": "h"}
    )


def test_wal_mode(store: JobStore, tmp_path: Path) -> None:
    import sqlite3

    con = sqlite3.connect(tmp_path / "jobs.sqlite3")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_create_is_idempotent_per_run_and_token(store: JobStore) -> None:
    a, dup_a = _new(store)
    b, dup_b = _new(store)
    c, _ = _new(store, run="r2")
    assert (dup_a, dup_b) == (False, True)
    assert a.job_id == b.job_id != c.job_id


def test_queue_order_and_claim(store: JobStore) -> None:
    first, _ = _new(store, "a")
    second, _ = _new(store, "b")
    assert store.queue_position(first.job_id) == 1
    assert store.queue_position(second.job_id) == 2
    claimed = store.claim_next()
    assert claimed is not None and claimed.job_id == first.job_id
    assert claimed.state is JobState.RUNNING and claimed.attempts == 1
    assert store.queue_position(second.job_id) == 1


def test_progress_finish_and_terminal(store: JobStore) -> None:
    job, _ = _new(store)
    store.claim_next()
    store.progress(job.job_id, 4)
    got = store.get(job.job_id)
    assert got is not None and got.episodes_done == 4 and got.heartbeat > 0
    store.finish(job.job_id, JobState.SUCCEEDED, result_json="{}", episodes_done=10)
    done = store.get(job.job_id)
    assert done is not None and done.terminal and done.result_json == "{}"
    store.progress(job.job_id, 1)  # a late progress message never rewinds a finished job
    assert store.get(job.job_id).episodes_done == 10  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        store.finish(job.job_id, JobState.RUNNING)


def test_jobs_of_a_dead_process_are_requeued_once_their_lease_expires(tmp_path: Path) -> None:
    s = JobStore(tmp_path / "jobs.sqlite3", lease_s=0.2)
    job, _ = _new(s)
    s.claim_next()
    s.close()  # the process "dies" with the job RUNNING
    again = JobStore(tmp_path / "jobs.sqlite3")
    time.sleep(0.3)
    assert again.requeue_expired().requeued == [job.job_id]
    got = again.get(job.job_id)
    assert got is not None and got.state is JobState.QUEUED
    assert again.claim_next() is not None
    again.close()


def test_infrastructure_failures_do_not_count_against_quota(store: JobStore) -> None:
    a, _ = _new(store, "a")
    b, _ = _new(store, "b")
    store.finish(b.job_id, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE)
    assert store.count_for_run("r1") == 1
    store.finish(a.job_id, JobState.REJECTED, failure_source=FailureSource.SUBMISSION)
    assert store.count_for_run("r1") == 1


def test_event_sequence_is_contiguous(store: JobStore) -> None:
    for _ in range(3):
        store.append_event("r1", lambda seq: f'{{"eval_seq": {seq}}}')
    store.append_event("r2", lambda seq: f'{{"eval_seq": {seq}}}')
    assert store.events("r1") == ['{"eval_seq": 0}', '{"eval_seq": 1}', '{"eval_seq": 2}']
    assert store.events("r2") == ['{"eval_seq": 0}']
