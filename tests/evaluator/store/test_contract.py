"""The job store contract: one set of cases, run against every store (``backend``).

What any :class:`JobStore` must do for evaluators sharing it (see
:mod:`ale_robotics.evaluator.store.ports`): jobs deduplicated by client token;
claims under an owner and a lease, scoped to a run when asked, each job to one
claimer; renewal; conditional writes that a process which lost its job loses;
expired leases requeued (eval-session rows failed instead, in the same
transaction); runs cancelled; quota, retry and queue counts; each run's events
numbered 0, 1, 2 ... with no gap however many threads, stores and processes
append at once, and one preamble however many race its first event; the runs
opened with OpenRun and their practice step counts, shared by every store at
once; the schema created once, reopened unchanged, never lowered, a new migration
applied once by stores opening together.

Each test opens one store per simulated evaluator process on one fresh file or
database, as those processes do.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from stores import Backend

from ale_robotics.evaluator.store import (
    DEFAULT_LEASE_S,
    EventLog,
    JobStore,
    RunRecord,
    SqlJobStore,
    migrations,
    new_job_id,
)
from ale_robotics.evaluator.store.migrations import Migration
from ale_robotics.model.states import FailureSource, JobState

SHORT = 0.3
"""A lease short enough to expire within a test."""


def _new(store: JobStore, token: str = "t", run: str = "r1") -> str:
    job, _ = store.create(
        run_id=run, task_id="task-v1", client_token=token, episodes_total=10, files={"p": "h"}
    )
    return job.job_id


def _expire(lease_s: float = SHORT) -> None:
    time.sleep(lease_s * 1.5)


def _event(seq: int) -> str:
    return json.dumps({"eval_seq": seq})


# ---------------------------------------------------------------- creation --


def test_create_is_idempotent_per_run_and_client_token(backend: Backend) -> None:
    store = backend.open()
    a, dup_a = store.create(
        run_id="r1", task_id="task-v1", client_token="t", episodes_total=10, files={"p": "h"}
    )
    b, dup_b = store.create(
        run_id="r1", task_id="other", client_token="t", episodes_total=3, files={}
    )
    c, dup_c = store.create(
        run_id="r2", task_id="task-v1", client_token="t", episodes_total=10, files={}
    )
    assert (dup_a, dup_b, dup_c) == (False, True, False)
    assert a.job_id == b.job_id != c.job_id
    assert b == a  # the first one's fields, untouched by the duplicate
    assert a.state is JobState.QUEUED and a.attempts == 0 and a.owner == "" and a.lease_until == 0
    assert a.files == {"p": "h"} and a.episodes_total == 10 and a.result_json is None
    assert a.created > 0 and a.created == a.updated and a.heartbeat == 0
    assert store.get(a.job_id) == a and store.by_token("r1", "t") == a
    assert store.latest_for_run("r2") == c
    assert store.get("job-nope") is None and store.by_token("r1", "nope") is None
    assert store.latest_for_run("nope") is None


def test_concurrent_creates_of_one_token_make_one_job(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()
    go = threading.Barrier(len(stores))

    def submit(s: JobStore) -> None:
        go.wait()
        job, dup = s.create(
            run_id="r1", task_id="t", client_token="same", episodes_total=1, files={}
        )
        with lock:
            results.append((job.job_id, dup))

    threads = [threading.Thread(target=submit, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({job for job, _ in results}) == 1
    assert sorted(dup for _, dup in results) == [False, True, True, True]


def test_create_with_a_given_job_id_stores_it_and_dedups_by_token(backend: Backend) -> None:
    """The caller may choose the id (:func:`new_job_id`), to put the job's snapshot in
    place before the job exists; a duplicate token still returns the existing job."""
    store = backend.open()
    chosen = new_job_id()
    job, dup = store.create(
        run_id="r1", task_id="t", client_token="a", episodes_total=2, files={}, job_id=chosen
    )
    assert (job.job_id, dup) == (chosen, False)
    assert store.get(chosen) == job
    again, dup = store.create(
        run_id="r1", task_id="t", client_token="a", episodes_total=2, files={}, job_id=new_job_id()
    )
    assert (again, dup) == (job, True)
    other, dup = backend.open().create(
        run_id="r2", task_id="t", client_token="a", episodes_total=2, files={}
    )
    assert not dup and other.job_id != chosen and other.job_id.startswith("job-")


def test_a_given_job_id_that_is_malformed_or_taken_is_refused(backend: Backend) -> None:
    store = backend.open()
    for bad in ("", "job-", "../etc", "job-ABC", "x" * 200, "job-0123456789abcdef/x"):
        with pytest.raises(ValueError, match="job_id"):
            store.create(
                run_id="r1", task_id="t", client_token="a", episodes_total=1, files={}, job_id=bad
            )
    taken = _new(store, "first")
    with pytest.raises(ValueError, match="taken"):
        store.create(
            run_id="r1",
            task_id="t",
            client_token="second",
            episodes_total=1,
            files={},
            job_id=taken,
        )
    assert store.by_token("r1", "second") is None and store.count_for_run("r1") == 1


def test_new_job_ids_differ_and_keep_their_format() -> None:
    ids = {new_job_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 20 and i.startswith("job-") and int(i[4:], 16) >= 0 for i in ids)


def test_rejected_and_running_rows_at_creation(backend: Backend) -> None:
    store = backend.open(owner="host:1:a")
    rejected, _ = store.create(
        run_id="r1",
        task_id="t",
        client_token="bad",
        episodes_total=5,
        files={},
        state=JobState.REJECTED,
        failure_reason="no policy file",
    )
    assert rejected.terminal and rejected.failure_source is FailureSource.SUBMISSION
    assert rejected.failure_reason == "no policy file" and rejected.owner == ""
    before = time.time()
    session, _ = store.create(
        run_id="r1",
        task_id="t",
        client_token="interactive-eval-session",
        episodes_total=5,
        files={},
        state=JobState.RUNNING,
    )
    assert session.owner == "host:1:a" and store.holds(session.job_id)
    assert session.heartbeat > 0
    assert before + DEFAULT_LEASE_S - 1 <= session.lease_until <= time.time() + DEFAULT_LEASE_S + 1
    assert store.claim_next() is None  # neither is queued


def test_lease_s_must_be_positive(backend: Backend) -> None:
    with pytest.raises(ValueError, match="lease_s"):
        backend.open(lease_s=0)


def test_default_owner_ids_name_the_process_and_differ(backend: Backend) -> None:
    a, b = backend.open(), backend.open()
    assert a.owner != b.owner
    host, pid, _ = a.owner.split(":")
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())


# ------------------------------------------------------------------ claims --


def test_claims_take_the_oldest_queued_job_with_owner_and_lease(backend: Backend) -> None:
    a = backend.open(owner="host:1:a")
    first, second = _new(a, "a"), _new(a, "b")
    assert a.queue_position(first) == 1 and a.queue_position(second) == 2
    before = time.time()
    job = a.claim_next()
    assert job is not None and job.job_id == first
    assert job.state is JobState.RUNNING and job.owner == "host:1:a" and job.attempts == 1
    assert before + DEFAULT_LEASE_S - 1 <= job.lease_until <= time.time() + DEFAULT_LEASE_S + 1
    assert job.heartbeat > 0 and job.episodes_done == 0
    assert a.holds(first) and not a.holds(second)
    assert a.queue_position(first) == 0 and a.queue_position(second) == 1
    assert a.queue_position("job-nope") == 0
    nxt = a.claim_next()
    assert nxt is not None and nxt.job_id == second
    assert a.claim_next() is None


def test_an_embedded_evaluator_claims_only_its_runs_jobs(backend: Backend) -> None:
    a = backend.open(owner="run-a")
    other = _new(a, "x", run="run-b")  # older: a shared claim would take it first
    mine = _new(a, "y", run="run-a")
    claimed = a.claim_next(run_id="run-a")
    assert claimed is not None and claimed.job_id == mine
    assert a.claim_next(run_id="run-a") is None
    waiting = a.get(other)
    assert waiting is not None and waiting.state is JobState.QUEUED
    shared = backend.open(owner="shared")
    took = shared.claim_next()  # a shared evaluator: any run's
    assert took is not None and took.job_id == other


def test_concurrent_claimers_each_get_a_different_job(backend: Backend) -> None:
    n_jobs, n_claimers = 30, 6
    seed = backend.open()
    ids = {_new(seed, f"t{i}") for i in range(n_jobs)}
    claimers = [backend.open(owner=f"c{i}") for i in range(n_claimers)]
    got: list[tuple[str, str]] = []
    lock = threading.Lock()
    go = threading.Barrier(n_claimers)

    def work(s: JobStore) -> None:
        go.wait()
        while (job := s.claim_next()) is not None:
            with lock:
                got.append((job.job_id, job.owner))

    threads = [threading.Thread(target=work, args=(s,)) for s in claimers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(j for j, _ in got) == sorted(ids)  # every job once, none twice
    for job_id, owner in got:
        job = seed.get(job_id)
        assert job is not None and job.owner == owner and job.attempts == 1


def test_renewal_keeps_a_job_past_its_first_lease(backend: Backend) -> None:
    a = backend.open(owner="a", lease_s=SHORT)
    other = backend.open(owner="other", lease_s=SHORT)
    job_id = _new(a)
    claimed = a.claim_next()
    assert claimed is not None
    for _ in range(4):  # four renewals a third of a lease apart: over a lease in all
        time.sleep(SHORT / 3)
        assert a.renew() == {job_id}
        assert other.requeue_expired().requeued == []
    assert other.renew() == set()  # renewing is for one's own jobs only
    got = a.get(job_id)
    assert got is not None and got.state is JobState.RUNNING and got.owner == "a"
    assert got.lease_until > claimed.lease_until and got.heartbeat > claimed.heartbeat


def test_progress_and_heartbeat_renew_and_are_the_owners_only(backend: Backend) -> None:
    a = backend.open(owner="a", lease_s=SHORT)
    b = backend.open(owner="b")
    job_id = _new(a)
    claimed = a.claim_next()
    assert claimed is not None
    assert b.progress(job_id, 7) is False and b.heartbeat(job_id) is False
    time.sleep(SHORT / 3)
    assert a.progress(job_id, 4) is True
    after = a.get(job_id)
    assert after is not None and after.episodes_done == 4
    assert after.lease_until > claimed.lease_until and after.updated >= claimed.updated
    time.sleep(SHORT / 3)
    assert a.heartbeat(job_id) is True
    beat = a.get(job_id)
    assert beat is not None and beat.lease_until > after.lease_until
    assert beat.episodes_done == 4
    assert a.progress("job-nope", 1) is False and a.heartbeat("job-nope") is False


# --------------------------------------------------------------- finishing --


def test_finish_progress_and_terminal_jobs(backend: Backend) -> None:
    store = backend.open()
    job_id = _new(store)
    store.claim_next()
    store.progress(job_id, 4)
    assert store.finish(job_id, JobState.SUCCEEDED, owned=True, result_json="{}", episodes_done=10)
    done = store.get(job_id)
    assert done is not None and done.terminal and done.result_json == "{}"
    assert done.episodes_done == 10 and done.lease_until == 0
    assert not store.holds(job_id)
    assert store.progress(job_id, 1) is False  # a late progress never rewinds a finished job
    again = store.get(job_id)
    assert again is not None and again.episodes_done == 10
    with pytest.raises(ValueError):
        store.finish(job_id, JobState.RUNNING)
    with pytest.raises(ValueError):
        store.finish(job_id, JobState.QUEUED)


def test_finish_keeps_stored_fields_it_is_not_given(backend: Backend) -> None:
    store = backend.open()
    job_id = _new(store)
    store.claim_next()
    store.progress(job_id, 6)
    assert store.finish(
        job_id,
        JobState.FAILED,
        owned=True,
        failure_source=FailureSource.SUBMISSION,
        failure_reason="NaN action",
    )
    job = store.get(job_id)
    assert job is not None and job.episodes_done == 6 and job.result_json is None
    assert (job.state, job.failure_source, job.failure_reason) == (
        JobState.FAILED,
        FailureSource.SUBMISSION,
        "NaN action",
    )


def test_a_terminal_job_is_never_finished_again(backend: Backend) -> None:
    a = backend.open(owner="a")
    job_id = _new(a)
    assert a.finish(job_id, JobState.CANCELLED, failure_reason="cancelled") is True
    assert a.finish(job_id, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE) is False
    assert a.finish(job_id, JobState.SUCCEEDED, owned=True) is False
    job = a.get(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert job.failure_reason == "cancelled"
    assert a.finish("job-nope", JobState.FAILED) is False


def test_an_unowned_finish_ends_a_job_nobody_runs(backend: Backend) -> None:
    a = backend.open(owner="a")
    b = backend.open(owner="b")
    queued = _new(a, "q")
    assert a.finish(queued, JobState.SUCCEEDED, owned=True) is False  # not claimed by a
    assert b.finish(queued, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE)
    running = _new(a, "r")
    a.claim_next()
    assert b.finish(running, JobState.SUCCEEDED, owned=True) is False  # a's job
    assert b.finish(running, JobState.TIMED_OUT, failure_reason="deadline") is True  # unowned
    assert a.holds(running) is False


def test_requeue_counts_the_attempt_and_release_does_not(backend: Backend) -> None:
    a = backend.open(owner="a")
    b = backend.open(owner="b")
    job_id = _new(a)
    a.claim_next()
    assert b.requeue(job_id, "crash") is False and b.release(job_id) is False
    assert a.requeue(job_id, "retrying after an infrastructure failure: crash") is True
    job = a.get(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 1
    assert job.owner == "" and job.lease_until == 0 and "crash" in job.failure_reason
    assert a.requeue(job_id, "again") is False  # no longer held
    again = a.claim_next()
    assert again is not None and again.attempts == 2
    assert a.release(job_id) is True
    released = a.get(job_id)
    assert released is not None and released.state is JobState.QUEUED
    assert released.attempts == 1 and "crash" in released.failure_reason  # reason kept
    assert a.release(job_id) is False


# ------------------------------------------------------------------ leases --


def test_only_jobs_whose_lease_expired_are_requeued(backend: Backend) -> None:
    live = backend.open(owner="live", lease_s=DEFAULT_LEASE_S)
    dead = backend.open(owner="dead", lease_s=SHORT)
    kept = _new(live, "kept")
    live.claim_next()
    lost = _new(dead, "lost")
    dead.claim_next()
    starter = backend.open(owner="starter", lease_s=SHORT)
    assert starter.requeue_expired().requeued == []  # both leases still run
    _expire()
    out = starter.requeue_expired()
    assert (out.requeued, out.failed) == ([lost], [])
    again = starter.get(lost)
    assert again is not None and again.state is JobState.QUEUED and again.owner == ""
    assert again.lease_until == 0 and "lease" in again.failure_reason
    assert again.episodes_done == 0 and again.attempts == 1
    still = starter.get(kept)
    assert still is not None and still.state is JobState.RUNNING and still.owner == "live"
    assert starter.requeue_expired().requeued == []  # once


def test_a_dead_processs_job_is_requeued_after_reopening(backend: Backend) -> None:
    s = backend.open(lease_s=SHORT)
    job_id = _new(s)
    s.claim_next()
    s.close()  # the process "dies" with the job RUNNING
    again = backend.open()
    _expire()
    assert again.requeue_expired().requeued == [job_id]
    got = again.get(job_id)
    assert got is not None and got.state is JobState.QUEUED
    taken = again.claim_next()
    assert taken is not None and taken.attempts == 2


def test_an_owner_that_lost_its_job_cannot_overwrite_the_new_owner(backend: Backend) -> None:
    old = backend.open(owner="old", lease_s=SHORT)
    new = backend.open(owner="new", lease_s=DEFAULT_LEASE_S)
    job_id = _new(old)
    old.claim_next()
    _expire()  # the old process stalled past its lease
    assert new.requeue_expired().requeued == [job_id]
    taken = new.claim_next()
    assert taken is not None and taken.owner == "new" and taken.attempts == 2
    new.progress(job_id, 3)

    # the old process wakes up: every write it tries is refused and says so
    assert old.holds(job_id) is False
    assert old.progress(job_id, 9) is False
    assert old.heartbeat(job_id) is False
    assert old.requeue(job_id, "crash") is False
    assert old.release(job_id) is False
    assert old.renew() == set()
    assert old.append_event("r1", _event, held_job=job_id) is False
    assert old.finish(job_id, JobState.SUCCEEDED, owned=True, result_json='{"old": 1}') is False
    assert new.events("r1") == []
    job = new.get(job_id)
    assert job is not None and job.state is JobState.RUNNING and job.owner == "new"
    assert job.episodes_done == 3 and job.result_json is None and job.attempts == 2

    # while the new owner's own writes go through
    assert new.append_event("r1", _event, held_job=job_id) is True
    assert new.finish(job_id, JobState.SUCCEEDED, owned=True, result_json="{}") is True
    done = new.get(job_id)
    assert done is not None and done.state is JobState.SUCCEEDED and done.lease_until == 0


def test_requeuing_expired_jobs_can_be_scoped_to_one_run(backend: Backend) -> None:
    dead = backend.open(owner="dead", lease_s=SHORT)
    a_job, b_job = _new(dead, "a", run="run-a"), _new(dead, "b", run="run-b")
    dead.claim_next()
    dead.claim_next()
    _expire()
    embedded_b = backend.open(owner="b")
    assert embedded_b.requeue_expired(run_id="run-b").requeued == [b_job]
    left = embedded_b.get(a_job)
    assert left is not None and left.state is JobState.RUNNING  # another run's: not ours
    assert embedded_b.requeue_expired().requeued == [a_job]


def test_expired_jobs_that_cannot_be_rerun_fail_instead(backend: Backend) -> None:
    dead = backend.open(owner="dead", lease_s=SHORT)
    session, _ = dead.create(
        run_id="r1",
        task_id="t",
        client_token="interactive-eval-session",
        episodes_total=5,
        files={},
        state=JobState.RUNNING,
    )
    batch = _new(dead, "batch")
    dead.claim_next()
    _expire()
    other = backend.open(owner="other")
    out = other.requeue_expired(fail_tokens={"interactive-eval-session"}, fail_reason="gone")
    assert (out.requeued, out.failed) == ([batch], [session.job_id])
    failed = other.get(session.job_id)
    assert failed is not None and failed.state is JobState.FAILED and failed.lease_until == 0
    assert failed.failure_source is FailureSource.INFRASTRUCTURE and failed.failure_reason == "gone"
    assert other.claim_next() is not None and other.claim_next() is None  # only the batch job


def test_expired_eval_session_rows_fail_before_any_claimer_sees_them(backend: Backend) -> None:
    """The fail happens in the requeue's own transaction: a claimer racing the reaper
    never gets an eval session's row as a queued job."""
    dead = backend.open(owner="dead", lease_s=SHORT)
    sessions = []
    for n in range(10):
        job, _ = dead.create(
            run_id=f"r{n}",
            task_id="t",
            client_token="interactive-eval-session",
            episodes_total=5,
            files={},
            state=JobState.RUNNING,
        )
        sessions.append(job.job_id)
    _expire()
    reaper, claimer = backend.open(owner="reaper"), backend.open(owner="claimer")
    claimed: list[str] = []
    stop = threading.Event()

    def claim() -> None:
        while not stop.is_set():
            job = claimer.claim_next()
            if job is not None:
                claimed.append(job.job_id)

    t = threading.Thread(target=claim)
    t.start()
    try:
        out = reaper.requeue_expired(fail_tokens={"interactive-eval-session"}, fail_reason="x")
    finally:
        time.sleep(0.05)
        stop.set()
        t.join()
    assert out.requeued == [] and sorted(out.failed) == sorted(sessions)
    assert claimed == []


# ------------------------------------------------------------ cancellation --


def test_cancelling_a_run_ends_its_queued_and_running_jobs(backend: Backend) -> None:
    runner = backend.open(owner="runner", lease_s=SHORT)
    running = _new(runner, "a")
    runner.claim_next()
    queued = _new(runner, "b")
    done = _new(runner, "c")
    runner.finish(done, JobState.REJECTED, failure_source=FailureSource.SUBMISSION)
    elsewhere = _new(runner, "d", run="r2")
    harness = backend.open(owner="harness", lease_s=SHORT)
    assert harness.cancel_run("r1", "the run was interrupted") == [running, queued]
    for job_id in (running, queued):
        job = harness.get(job_id)
        assert job is not None and job.state is JobState.CANCELLED and job.lease_until == 0
        assert job.failure_reason == "the run was interrupted"
        assert job.failure_source is FailureSource.NONE
    finished = harness.get(done)
    assert finished is not None and finished.state is JobState.REJECTED  # terminal: untouched
    assert runner.renew() == set()  # the runner finds out at its next renewal
    assert runner.progress(running, 2) is False
    assert runner.finish(running, JobState.SUCCEEDED, owned=True) is False
    assert runner.requeue(running, "crash") is False
    assert runner.append_event("r1", _event, held_job=running) is False
    _expire()
    assert harness.requeue_expired().requeued == []  # nothing comes back later
    other = harness.get(elsewhere)
    assert other is not None and other.state is JobState.QUEUED
    assert harness.cancel_run("r1", "again") == []


# ------------------------------------------------------------------ counts --


def test_quota_counts_infrastructure_failures_beyond_the_allowance(backend: Backend) -> None:
    store = backend.open()
    ids = [_new(store, token) for token in ("a", "b", "c", "d")]
    assert store.count_for_run("r1") == 4 and store.quota_used("r1", 1) == 4
    for job_id in ids[:3]:
        store.finish(job_id, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE)
    store.finish(ids[3], JobState.FAILED, failure_source=FailureSource.SUBMISSION)
    assert store.count_for_run("r1") == 1  # infrastructure failures never count here
    assert store.quota_used("r1", 1) == 1 + 2  # the submission's failure + 2 beyond 1 free
    assert store.quota_used("r1", 0) == 4
    assert store.quota_used("r1", 5) == 1
    assert store.quota_used("other", 1) == 0 and store.count_for_run("other") == 0


def test_retries_used_sums_every_attempt_after_the_first(backend: Backend) -> None:
    store = backend.open()
    for token in ("a", "b"):
        _new(store, token)
    _new(store, "x", run="r2")
    assert store.retries_used("r1") == 0  # never attempted
    first = store.claim_next()
    assert first is not None
    store.requeue(first.job_id, "crash")
    store.claim_next()  # attempt 2 of the first job
    assert store.retries_used("r1") == 1
    store.claim_next()  # attempt 1 of the second: not a re-run
    assert store.retries_used("r1") == 1
    assert store.retries_used("r2") == 0 and store.retries_used("nope") == 0


def test_queue_position_counts_queued_jobs_of_every_run_ahead(backend: Backend) -> None:
    store = backend.open()
    a, b, c = _new(store, "a"), _new(store, "b", run="r2"), _new(store, "c")
    assert [store.queue_position(j) for j in (a, b, c)] == [1, 2, 3]
    store.finish(b, JobState.CANCELLED)
    assert [store.queue_position(j) for j in (a, b, c)] == [1, 0, 2]
    store.claim_next()
    assert [store.queue_position(j) for j in (a, b, c)] == [0, 0, 1]


def test_queue_position_of_a_run_counts_only_its_own_jobs(backend: Backend) -> None:
    """An embedded evaluator runs only its run's jobs: another run's queued jobs on the
    shared state dir are not ahead of them there."""
    store = backend.open()
    other1, other2 = _new(store, "o1", run="other"), _new(store, "o2", run="other")
    mine1, mine2 = _new(store, "m1", run="mine"), _new(store, "m2", run="mine")
    assert [store.queue_position(j) for j in (mine1, mine2)] == [3, 4]
    assert [store.queue_position(j, same_run=True) for j in (mine1, mine2)] == [1, 2]
    assert [store.queue_position(j, same_run=True) for j in (other1, other2)] == [1, 2]
    store.claim_next(run_id="mine")
    assert store.queue_position(mine2, same_run=True) == 1
    assert store.queue_position(mine1, same_run=True) == 0


# ------------------------------------------------------------------ events --


def test_event_sequence_is_contiguous_per_run(backend: Backend) -> None:
    store = backend.open()
    assert store.events("r1") == []
    for _ in range(3):
        assert store.append_event("r1", _event) is True
    store.append_event("r2", _event)
    assert store.events("r1") == [_event(0), _event(1), _event(2)]
    assert store.events("r2") == [_event(0)]


def test_a_held_jobs_events_are_stored_only_while_held(backend: Backend) -> None:
    a = backend.open(owner="a")
    b = backend.open(owner="b")
    job_id = _new(a)
    assert a.append_event("r1", _event, held_job=job_id) is False  # queued: nobody's
    a.claim_next()
    assert b.append_event("r1", _event, held_job=job_id) is False  # a's
    assert a.append_event("r1", _event, held_job=job_id) is True
    assert b.append_event("r1", _event) is True  # not tied to a job: any process
    assert a.events("r1") == [_event(0), _event(1)]


def test_appends_from_many_threads_and_stores_leave_no_gap(backend: Backend) -> None:
    stores = [backend.open(owner=f"s{i}") for i in range(2)]
    per_writer, writers_per_store = 25, 4
    go = threading.Barrier(len(stores) * writers_per_store)

    def write(store: JobStore, name: str) -> None:
        go.wait()
        for n in range(per_writer):
            for run in ("r1", "r2"):
                store.append_event(
                    run, lambda seq, n=n: json.dumps({"eval_seq": seq, "w": name, "n": n})
                )

    threads = [
        threading.Thread(target=write, args=(s, f"{i}.{k}"))
        for i, s in enumerate(stores)
        for k in range(writers_per_store)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = len(threads) * per_writer
    for run in ("r1", "r2"):
        _check_sequence(stores[0].events(run), total, per_writer)


def _key(seq: int) -> str:
    return json.dumps({"eval_seq": seq, "kind": "evaluator_key"})


def _commitment(seq: int) -> str:
    return json.dumps({"eval_seq": seq, "kind": "seed_commitment"})


def test_the_preamble_comes_first_and_only_once(backend: Backend) -> None:
    store = backend.open()
    preamble = (_key, _commitment)
    assert store.append_event("r1", _event, preamble=preamble) is True
    assert store.append_event("r1", _event, preamble=preamble) is True
    assert store.append_event("r1", _event) is True
    assert store.events("r1") == [_key(0), _commitment(1), _event(2), _event(3), _event(4)]
    assert store.append_event("r2", _event, preamble=[]) is True  # empty: nothing before
    assert store.events("r2") == [_event(0)]


def test_a_refused_event_writes_no_preamble_either(backend: Backend) -> None:
    a = backend.open(owner="a")
    job_id = _new(a)  # queued: nobody holds it
    assert a.append_event("r1", _event, held_job=job_id, preamble=(_key, _commitment)) is False
    assert a.events("r1") == []
    a.claim_next()
    assert a.append_event("r1", _event, held_job=job_id, preamble=(_key, _commitment)) is True
    assert a.events("r1") == [_key(0), _commitment(1), _event(2)]


def test_replicas_racing_a_runs_first_event_write_one_preamble(backend: Backend) -> None:
    """Two stores (two connections: two replicas), several threads each, all appending
    a run's first event with its preamble at once: exactly one preamble, at 0 and 1."""
    stores = [backend.open(owner=f"replica-{i}") for i in range(2)]
    threads_per_store, rounds = 4, 5
    for round_ in range(rounds):
        run = f"race-{round_}"
        go = threading.Barrier(len(stores) * threads_per_store)

        def write(store: JobStore, name: str, run: str = run, go: threading.Barrier = go) -> None:
            go.wait()
            store.append_event(
                run,
                lambda seq: json.dumps({"eval_seq": seq, "w": name}),
                preamble=(_key, _commitment),
            )

        threads = [
            threading.Thread(target=write, args=(s, f"{i}.{k}"))
            for i, s in enumerate(stores)
            for k in range(threads_per_store)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        docs = [json.loads(e) for e in stores[1].events(run)]
        assert [d["eval_seq"] for d in docs] == list(range(2 + len(threads)))
        assert [d.get("kind") for d in docs[:2]] == ["evaluator_key", "seed_commitment"]
        assert all("kind" not in d for d in docs[2:])  # no second preamble anywhere
        assert sorted(d["w"] for d in docs[2:]) == sorted(
            f"{i}.{k}" for i in range(len(stores)) for k in range(threads_per_store)
        )


_CHILD = """
import json, sys
from ale_robotics.evaluator.store import open_store
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(url)
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()  # go
for n in range(count):
    store.append_event("r1", lambda seq: json.dumps({"eval_seq": seq, "w": name, "n": n}))
store.close()
"""


def test_appends_from_several_processes_leave_no_gap(backend: Backend) -> None:
    per_writer = 40
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, backend.url, f"p{i}", str(per_writer)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        mine = backend.open()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        for n in range(per_writer):  # and this process at the same time
            mine.append_event(
                "r1", lambda seq, n=n: json.dumps({"eval_seq": seq, "w": "me", "n": n})
            )
        for child in children:
            assert child.wait(timeout=60) == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    _check_sequence(mine.events("r1"), 4 * per_writer, per_writer)


def _check_sequence(events: list[str], total: int, per_writer: int) -> None:
    """Numbered 0..total-1 in order, each writer's events all there and in its own order."""
    docs = [json.loads(e) for e in events]
    assert [d["eval_seq"] for d in docs] == list(range(total))
    writers = Counter(d["w"] for d in docs)
    assert set(writers.values()) == {per_writer}
    for w in writers:
        assert [d["n"] for d in docs if d["w"] == w] == list(range(per_writer))


# -------------------------------------------------------------------- runs --


def _run(run_id: str = "run-1", digest: str = "d" * 64, **kw: object) -> RunRecord:
    fields: dict[str, object] = {
        "run_id": run_id,
        "task_id": "task-v1",
        "token_sha256": digest,
        "submission_dir": f"/vol/{run_id}",
        "opened_unix": 1000.0,
        **kw,
    }
    return RunRecord(**fields)  # type: ignore[arg-type]


def test_a_run_added_on_one_store_is_seen_by_every_other_at_once(backend: Backend) -> None:
    a, b = backend.open(owner="a"), backend.open(owner="b")
    assert b.get_run("run-1") is None and b.open_run_by_token("d" * 64) is None
    assert a.add_run(_run()) is True
    assert b.get_run("run-1") == _run()
    assert b.open_run_by_token("d" * 64) == _run()
    assert b.open_run_by_token("e" * 64) is None
    assert b.add_run(_run(digest="f" * 64, task_id="other")) is False  # run ids: single use
    assert a.get_run("run-1") == _run()  # the first one's, untouched


def test_a_revoked_runs_token_is_refused_by_every_store_at_once(backend: Backend) -> None:
    a, b = backend.open(owner="a"), backend.open(owner="b")
    a.add_run(_run())
    assert a.open_run_by_token("d" * 64) is not None  # a's view before the revocation
    before = time.time()
    closed = b.revoke_run("run-1")
    assert closed is not None and before - 1 <= closed.closed_unix <= time.time() + 1
    assert a.open_run_by_token("d" * 64) is None  # at once, on the other store
    got = a.get_run("run-1")
    assert got == closed and not got.open  # still known: its id stays used
    again = a.revoke_run("run-1")  # idempotent: the first closing time stands
    assert again == closed
    assert a.revoke_run("never") is None


def test_concurrent_adds_of_one_run_id_let_one_win(backend: Backend) -> None:
    stores = [backend.open(owner=f"s{i}") for i in range(4)]
    go = threading.Barrier(len(stores))
    won: list[bool] = []
    lock = threading.Lock()

    def add(i: int) -> None:
        go.wait()
        ok = stores[i].add_run(_run(digest=f"{i}" * 64))
        with lock:
            won.append(ok)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False, False, False, True]
    winner = stores[0].get_run("run-1")
    assert winner is not None
    assert [s.open_run_by_token(f"{i}" * 64) is not None for i, s in enumerate(stores)].count(
        True
    ) == 1


def test_a_closed_run_can_be_added_as_imported(backend: Backend) -> None:
    store = backend.open()
    assert store.add_run(_run(closed_unix=2000.0)) is True
    got = store.get_run("run-1")
    assert got is not None and got.closed_unix == 2000.0
    assert store.open_run_by_token("d" * 64) is None


# ---------------------------------------------------------- practice steps --


def test_practice_steps_count_per_run_and_refuse_past_the_limit(backend: Backend) -> None:
    a, b = backend.open(owner="a"), backend.open(owner="b")
    assert a.practice_steps("r1") == 0
    assert a.charge_practice_steps("r1", 3, limit=10) == (True, 3)
    assert b.charge_practice_steps("r1", 4, limit=10) == (True, 7)
    assert a.charge_practice_steps("r1", 4, limit=10) == (False, 7)  # would be 11: nothing
    assert b.charge_practice_steps("r1", 3, limit=10) == (True, 10)  # exactly the limit
    assert a.charge_practice_steps("r1", 1, limit=10) == (False, 10)
    assert a.charge_practice_steps("r1", 5, limit=None) == (True, 15)  # not enforced
    assert a.charge_practice_steps("r2", 11, limit=10) == (False, 0)  # a first Step too big
    assert (b.practice_steps("r1"), b.practice_steps("r2")) == (15, 0)
    with pytest.raises(ValueError, match="negative"):
        a.charge_practice_steps("r1", -1, limit=None)


def test_replicas_charging_at_once_never_pass_the_budget_together(backend: Backend) -> None:
    """The increment and the check are one step: however many replicas charge at once,
    exactly ``limit`` single steps pass, never one more."""
    stores = [backend.open(owner=f"replica-{i}") for i in range(3)]
    limit, threads_per_store, tries = 60, 3, 30
    go = threading.Barrier(len(stores) * threads_per_store)
    passed: list[int] = []
    lock = threading.Lock()

    def charge(store: JobStore) -> None:
        go.wait()
        mine = 0
        for _ in range(tries):
            ok, used = store.charge_practice_steps("r1", 1, limit=limit)
            assert used <= limit
            mine += ok
        with lock:
            passed.append(mine)

    threads = [
        threading.Thread(target=charge, args=(s,)) for s in stores for _ in range(threads_per_store)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(passed) == limit == stores[0].practice_steps("r1")


# ------------------------------------------------------------------ schema --


def test_a_fresh_store_is_at_the_current_schema_and_reopens_unchanged(backend: Backend) -> None:
    first = backend.open()
    assert first.schema_version() == type(first).SCHEMA_VERSION
    job_id = _new(first)
    first.append_event("r1", _event)
    first.add_run(_run())
    first.charge_practice_steps("run-1", 4, limit=None)
    first.close()
    again = backend.open()
    assert again.schema_version() == type(again).SCHEMA_VERSION
    job = again.get(job_id)
    assert job is not None and job.state is JobState.QUEUED  # the data survives a reopen
    assert again.events("r1") == [_event(0)]
    assert again.get_run("run-1") == _run() and again.practice_steps("run-1") == 4


def _open_together(backend: Backend, n: int) -> list[JobStore]:
    """``n`` stores opened at once (threads released together); each must open."""
    errors: list[BaseException] = []
    opened: list[JobStore] = []
    lock = threading.Lock()
    go = threading.Barrier(n)

    def open_one() -> None:
        go.wait()
        try:
            store = backend.open()
        except BaseException as exc:  # reported below
            with lock:
                errors.append(exc)
            return
        with lock:
            opened.append(store)

    threads = [threading.Thread(target=open_one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return opened


def test_stores_opening_a_fresh_file_or_database_at_once_all_succeed(backend: Backend) -> None:
    opened = _open_together(backend, 6)
    assert {s.schema_version() for s in opened} == {type(opened[0]).SCHEMA_VERSION}
    _new(opened[0])
    assert opened[-1].claim_next() is not None


def test_a_newer_schema_version_is_never_lowered(backend: Backend) -> None:
    first = backend.open()
    newer = type(first).SCHEMA_VERSION + 1
    first.close()
    backend.set_schema_version(newer)
    store = backend.open()
    assert store.schema_version() == newer
    _new(store)  # and it works on it
    assert store.claim_next() is not None


def test_a_new_migration_is_applied_once_by_stores_opening_together(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of the next release opens an older database: the new version is applied
    once, in order, however many stores open it at once, and the data is kept."""
    old = backend.open(owner="old")
    job_id = _new(old)
    old.close()
    nxt = SqlJobStore.SCHEMA_VERSION + 1
    note = Migration(nxt, ("ALTER TABLE jobs ADD COLUMN note TEXT NOT NULL DEFAULT ''",))
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, note))
    monkeypatch.setattr(SqlJobStore, "SCHEMA_VERSION", nxt)
    opened = _open_together(backend, 4)
    assert {s.schema_version() for s in opened} == {nxt}
    kept = opened[0].get(job_id)
    assert kept is not None and kept.state is JobState.QUEUED
    versions = backend.sql("SELECT version FROM schema_version ORDER BY version")
    assert [v for (v,) in versions] == list(range(1, nxt + 1))  # each applied once
    assert backend.sql("SELECT note FROM jobs") == [("",)]


def test_every_store_is_an_event_log(backend: Backend) -> None:
    store = backend.open()
    assert isinstance(store, EventLog)
    log: EventLog = store
    assert log.append_event("r1", _event) and log.events("r1") == [_event(0)]
