"""Job ownership in the store: claims under a lease, renewal, expiry, conditional writes.

Several evaluator processes share one ``jobs.sqlite3`` (every ``ale-robotics run``
embeds one on the default state dir). Each test opens one :class:`JobStore` per
simulated process on the same file, as those processes do, so the rules are
checked across real SQLite connections: a live process's job is never requeued,
a process that lost its job cannot write over the one that took it, an embedded
evaluator claims only its own run's jobs, and a schema-1 file from before leases
opens and gains the columns.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ale_robotics.evaluator.store import (
    DEFAULT_LEASE_S,
    FailureSource,
    JobState,
    JobStore,
)

SHORT = 0.2
"""A lease short enough to expire within a test."""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.sqlite3"


@pytest.fixture
def opened() -> Iterator[list[JobStore]]:
    stores: list[JobStore] = []
    yield stores
    for s in stores:
        s.close()


def _store(opened: list[JobStore], db: Path, owner: str, lease_s: float = SHORT) -> JobStore:
    s = JobStore(db, owner=owner, lease_s=lease_s)
    opened.append(s)
    return s


def _new(store: JobStore, token: str = "t", run: str = "r1") -> str:
    job, _ = store.create(
        run_id=run, task_id="task-v1", client_token=token, episodes_total=10, files={"p": "h"}
    )
    return job.job_id


def _expire(lease_s: float = SHORT) -> None:
    time.sleep(lease_s * 1.5)


def test_a_claim_records_the_owner_and_a_lease(opened: list[JobStore], db: Path) -> None:
    a = _store(opened, db, "host:1:a", lease_s=DEFAULT_LEASE_S)
    job_id = _new(a)
    before = time.time()
    job = a.claim_next()
    assert job is not None and job.job_id == job_id
    assert job.state is JobState.RUNNING and job.owner == "host:1:a" and job.attempts == 1
    assert before + DEFAULT_LEASE_S <= job.lease_until <= time.time() + DEFAULT_LEASE_S
    assert a.holds(job_id)


def test_default_owner_ids_name_the_process_and_differ(opened: list[JobStore], db: Path) -> None:
    import os
    import socket

    a, b = JobStore(db), JobStore(db)
    opened += [a, b]
    assert a.owner != b.owner
    host, pid, _ = a.owner.split(":")
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())


def test_renewal_keeps_a_job_past_its_first_lease(opened: list[JobStore], db: Path) -> None:
    a = _store(opened, db, "a")
    other = _store(opened, db, "other")
    job_id = _new(a)
    a.claim_next()
    for _ in range(4):  # four renewals a third of a lease apart: over a lease in all
        time.sleep(SHORT / 3)
        assert a.renew() == {job_id}
        assert other.requeue_expired().requeued == []
    assert other.renew() == set()  # renewing is for one's own jobs only
    got = a.get(job_id)
    assert got is not None and got.state is JobState.RUNNING and got.owner == "a"


def test_only_jobs_whose_lease_expired_are_requeued(opened: list[JobStore], db: Path) -> None:
    live = _store(opened, db, "live", lease_s=DEFAULT_LEASE_S)
    dead = _store(opened, db, "dead")
    kept = _new(live, "kept")
    live.claim_next()
    lost = _new(dead, "lost")
    dead.claim_next()
    starter = _store(opened, db, "starter")
    assert starter.requeue_expired().requeued == []  # both leases still run
    _expire()
    assert starter.requeue_expired().requeued == [lost]
    again = starter.get(lost)
    assert again is not None and again.state is JobState.QUEUED and again.owner == ""
    assert again.lease_until == 0 and "lease" in again.failure_reason
    still = starter.get(kept)
    assert still is not None and still.state is JobState.RUNNING and still.owner == "live"


def test_an_owner_that_lost_its_job_cannot_overwrite_the_new_owner(
    opened: list[JobStore], db: Path
) -> None:
    old = _store(opened, db, "old")
    new = _store(opened, db, "new", lease_s=DEFAULT_LEASE_S)
    job_id = _new(old)
    old.claim_next()
    _expire()  # the old process stalled past its lease
    assert new.requeue_expired().requeued == [job_id]
    taken = new.claim_next()
    assert taken is not None and taken.owner == "new" and taken.attempts == 2
    new.progress(job_id, 3)

    # the old process wakes up: every write it tries is refused and says so
    assert old.progress(job_id, 9) is False
    assert old.heartbeat(job_id) is False
    assert old.requeue(job_id, "crash") is False
    assert old.release(job_id) is False
    assert old.renew() == set()
    assert old.append_event("r1", lambda seq: "{}", held_job=job_id) is False
    assert old.finish(job_id, JobState.SUCCEEDED, owned=True, result_json='{"old": 1}') is False
    assert new.events("r1") == []
    job = new.get(job_id)
    assert job is not None and job.state is JobState.RUNNING and job.owner == "new"
    assert job.episodes_done == 3 and job.result_json is None and job.attempts == 2

    # while the new owner's own writes go through
    assert new.append_event("r1", lambda seq: f'{{"seq": {seq}}}', held_job=job_id) is True
    assert new.finish(job_id, JobState.SUCCEEDED, owned=True, result_json="{}") is True
    done = new.get(job_id)
    assert done is not None and done.state is JobState.SUCCEEDED and done.lease_until == 0


def test_a_terminal_job_is_never_finished_again(opened: list[JobStore], db: Path) -> None:
    a = _store(opened, db, "a")
    job_id = _new(a)
    assert a.finish(job_id, JobState.CANCELLED, failure_reason="cancelled") is True
    assert a.finish(job_id, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE) is False
    job = a.get(job_id)
    assert job is not None and job.state is JobState.CANCELLED


def test_an_embedded_evaluator_claims_only_its_runs_jobs(opened: list[JobStore], db: Path) -> None:
    a = _store(opened, db, "run-a", lease_s=DEFAULT_LEASE_S)
    other = _new(a, "x", run="run-b")  # older: a shared claim would take it first
    mine = _new(a, "y", run="run-a")
    claimed = a.claim_next(run_id="run-a")
    assert claimed is not None and claimed.job_id == mine
    assert a.claim_next(run_id="run-a") is None
    waiting = a.get(other)
    assert waiting is not None and waiting.state is JobState.QUEUED
    shared = _store(opened, db, "shared", lease_s=DEFAULT_LEASE_S)
    took = shared.claim_next()  # a shared evaluator: any run's
    assert took is not None and took.job_id == other


def test_requeuing_expired_jobs_can_be_scoped_to_one_run(opened: list[JobStore], db: Path) -> None:
    dead = _store(opened, db, "dead")
    a_job, b_job = _new(dead, "a", run="run-a"), _new(dead, "b", run="run-b")
    dead.claim_next()
    dead.claim_next()
    _expire()
    embedded_b = _store(opened, db, "b")
    assert embedded_b.requeue_expired(run_id="run-b").requeued == [b_job]
    left = embedded_b.get(a_job)
    assert left is not None and left.state is JobState.RUNNING  # another run's: not ours


def test_expired_jobs_that_cannot_be_rerun_fail_instead(opened: list[JobStore], db: Path) -> None:
    dead = _store(opened, db, "dead")
    session, _ = dead.create(
        run_id="r1",
        task_id="t",
        client_token="interactive-eval-session",
        episodes_total=5,
        files={},
        state=JobState.RUNNING,
    )
    assert session.owner == "dead" and session.lease_until > time.time()
    batch = _new(dead, "batch")
    dead.claim_next()
    _expire()
    other = _store(opened, db, "other")
    out = other.requeue_expired(fail_tokens={"interactive-eval-session"}, fail_reason="gone")
    assert (out.requeued, out.failed) == ([batch], [session.job_id])
    failed = other.get(session.job_id)
    assert failed is not None and failed.state is JobState.FAILED
    assert failed.failure_source is FailureSource.INFRASTRUCTURE and failed.failure_reason == "gone"
    assert other.claim_next() is not None and other.claim_next() is None  # only the batch job


def test_cancelling_a_run_ends_its_queued_and_running_jobs(
    opened: list[JobStore], db: Path
) -> None:
    runner = _store(opened, db, "runner", lease_s=DEFAULT_LEASE_S)
    running = _new(runner, "a")
    runner.claim_next()
    queued = _new(runner, "b")
    elsewhere = _new(runner, "c", run="r2")
    harness = _store(opened, db, "harness")
    assert harness.cancel_run("r1", "the run was interrupted") == [running, queued]
    for job_id in (running, queued):
        job = harness.get(job_id)
        assert job is not None and job.state is JobState.CANCELLED
        assert job.failure_reason == "the run was interrupted"
        assert job.failure_source is FailureSource.NONE
    assert runner.renew() == set()  # the runner finds out at its next renewal
    assert runner.finish(running, JobState.SUCCEEDED, owned=True) is False
    assert runner.requeue(running, "crash") is False
    _expire()
    assert harness.requeue_expired().requeued == []  # nothing comes back later
    other = harness.get(elsewhere)
    assert other is not None and other.state is JobState.QUEUED
    assert harness.cancel_run("r1", "again") == []


def test_release_gives_a_claim_back_without_counting_an_attempt(
    opened: list[JobStore], db: Path
) -> None:
    a = _store(opened, db, "a")
    job_id = _new(a)
    a.claim_next()
    assert a.release(job_id) is True
    job = a.get(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempts == 0


# ------------------------------------------------------------- migration --

_SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    client_token TEXT NOT NULL,
    state TEXT NOT NULL,
    episodes_done INTEGER NOT NULL DEFAULT 0,
    episodes_total INTEGER NOT NULL DEFAULT 0,
    failure_source TEXT NOT NULL DEFAULT '',
    failure_reason TEXT NOT NULL DEFAULT '',
    heartbeat REAL NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    files_json TEXT NOT NULL DEFAULT '{}',
    result_json TEXT,
    UNIQUE (run_id, client_token)
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    eval_seq INTEGER NOT NULL,
    event_json TEXT NOT NULL,
    PRIMARY KEY (run_id, eval_seq)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('schema_version', '1');
"""
"""The schema of the store before job leases, as a release without them wrote it."""


def _schema_1_file(db: Path) -> None:
    con = sqlite3.connect(db)
    con.executescript(_SCHEMA_1)
    now = time.time()
    for job_id, token, state in (("job-old-run", "a", "RUNNING"), ("job-old-q", "b", "QUEUED")):
        con.execute(
            "INSERT INTO jobs (job_id, run_id, task_id, client_token, state, created, updated, "
            "attempts) VALUES (?, 'r1', 'task-v1', ?, ?, ?, ?, ?)",
            (job_id, token, state, now, now, 1 if state == "RUNNING" else 0),
        )
    con.commit()
    con.close()


def test_a_schema_1_file_opens_and_gains_the_lease_columns(
    opened: list[JobStore], db: Path
) -> None:
    _schema_1_file(db)
    store = _store(opened, db, "new", lease_s=DEFAULT_LEASE_S)
    assert store.schema_version() == 2
    columns = {row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(jobs)")}
    assert {"owner", "lease_until"} <= columns
    old = store.get("job-old-run")
    assert old is not None and old.owner == "" and old.lease_until == 0
    # a job the old release left RUNNING belongs to nobody: its lease is long gone
    assert store.requeue_expired().requeued == ["job-old-run"]
    first = store.claim_next()
    assert first is not None and first.job_id == "job-old-run" and first.attempts == 2
    assert first.owner == "new"
    # opening it again (another process) changes nothing more
    again = _store(opened, db, "again")
    assert again.schema_version() == 2
    assert again.get("job-old-q") is not None


def test_a_newer_schema_version_is_never_lowered(opened: list[JobStore], db: Path) -> None:
    _store(opened, db, "a").close()
    opened.clear()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    assert _store(opened, db, "b").schema_version() == 3
