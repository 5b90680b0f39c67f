"""What only the SQLite store has: its file's journal mode and its schema-1 and -2 files.

The rules every store keeps are in ``test_contract.py``.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ale_robotics.evaluator.store import DEFAULT_LEASE_S, RunRecord, SqliteJobStore

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


def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite3"
    store = SqliteJobStore(db)
    try:
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        con.close()
    finally:
        store.close()


def test_a_schema_1_file_opens_and_gains_the_lease_columns(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite3"
    _schema_1_file(db)
    store = SqliteJobStore(db, owner="new", lease_s=DEFAULT_LEASE_S)
    again = None
    try:
        assert store.schema_version() == 3 == SqliteJobStore.SCHEMA_VERSION
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
        again = SqliteJobStore(db, owner="again")
        assert again.schema_version() == 3
        assert again.get("job-old-q") is not None
    finally:
        store.close()
        if again is not None:
            again.close()


def _schema_2_file(db: Path) -> None:
    """A file as the release before schema 3 left it: leases, no runs or practice tables."""
    _schema_1_file(db)
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
    con.execute("ALTER TABLE jobs ADD COLUMN lease_until REAL NOT NULL DEFAULT 0")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.commit()
    con.close()


def test_a_schema_2_file_gains_the_runs_and_practice_tables(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite3"
    _schema_2_file(db)
    store = SqliteJobStore(db)
    try:
        assert store.schema_version() == 3
        tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
        assert {"runs", "practice_steps"} <= tables
        assert store.get("job-old-q") is not None  # its jobs kept
        run = RunRecord("run-1", "task-v1", "a" * 64, "", 1.0)
        assert store.add_run(run) and store.get_run("run-1") == run
        assert store.charge_practice_steps("run-1", 2, limit=5) == (True, 2)
    finally:
        store.close()


def test_practice_charges_leave_the_connection_fully_synchronous(tmp_path: Path) -> None:
    """A charge commits with synchronous=NORMAL (one per practice Step); every other
    write keeps FULL, even after a refused charge."""
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    try:
        store.charge_practice_steps("r1", 1, limit=None)
        store.charge_practice_steps("r1", 5, limit=2)  # refused
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()
