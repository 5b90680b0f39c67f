"""The SQLite job store (WAL), the embedded default: one file in the state dir.

The rules every store keeps are in :mod:`.base`. Here several evaluator processes of
one host share the file (every ``ale-robotics run`` embeds an evaluator on the same
default state dir; a shared ``evaluator serve`` may run beside them); each write is
one SQLite transaction (``BEGIN IMMEDIATE``: the file's write lock up front), and
times are this host's clock.

Schema history (``meta.schema_version``): 1, the original table; 2 adds
``owner`` and ``lease_until`` (an old file gains them when it is opened; its
RUNNING jobs then have an expired lease, like those of any dead process).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ale_robotics.evaluator.store.base import (
    DEFAULT_LEASE_S,
    JOB_COLUMNS,
    REQUEUED_REASON,
    TERMINAL_STATES,
    ExpiredLeases,
    FailureSource,
    JobRecord,
    JobState,
    JobStore,
    job_from_row,
)

__all__ = ["SqliteJobStore"]

_SCHEMA = """
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
    owner TEXT NOT NULL DEFAULT '',
    lease_until REAL NOT NULL DEFAULT 0,
    UNIQUE (run_id, client_token)
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    eval_seq INTEGER NOT NULL,
    event_json TEXT NOT NULL,
    PRIMARY KEY (run_id, eval_seq)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_SCHEMA_VERSION = 2
_ADDED_COLUMNS = {
    # schema 2: job ownership
    "owner": "TEXT NOT NULL DEFAULT ''",
    "lease_until": "REAL NOT NULL DEFAULT 0",
}
"""Columns added since schema 1, each with the definition ALTER TABLE gives an old file."""
_RUNNING = JobState.RUNNING.value
_QUEUED = JobState.QUEUED.value


class SqliteJobStore(JobStore):
    """Thread-safe access to ``jobs.sqlite3``; one connection guarded by a lock.

    ``owner`` is the evaluator process this store acts for (default: a new
    :func:`.base.new_owner_id`) and ``lease_s`` how long its claims last unrenewed.
    Other processes open their own store on the same file. What each method
    does: :class:`.base.JobStore`.
    """

    SCHEMA_VERSION = _SCHEMA_VERSION

    def __init__(
        self, path: Path, *, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        super().__init__(owner=owner, lease_s=lease_s)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._wal()
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._migrate()

    def _wal(self) -> None:
        """Switch the file to WAL (a no-op once it is).

        SQLite answers "database is locked" at once, without waiting, to a process
        switching a fresh file while another opens it too (two runs starting on a
        new state dir): retried for up to 5 s, like any other busy lock.
        """
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self) -> None:
        """Bring a file of an older schema up to :data:`_SCHEMA_VERSION`.

        In one write transaction, so two processes opening an old file at once
        cannot both add a column (the second finds it there).
        """
        with self._tx():
            have = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
            for name, definition in _ADDED_COLUMNS.items():
                if name not in have:
                    self._db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {definition}")
            # never lowers the version a newer release wrote
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value "
                "WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)",
                (str(_SCHEMA_VERSION),),
            )

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """One write transaction under the lock (BEGIN IMMEDIATE: the write lock up front)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _one(self, sql: str, args: tuple[Any, ...]) -> JobRecord | None:
        with self._lock:
            row = self._db.execute(f"SELECT {JOB_COLUMNS} FROM jobs {sql}", args).fetchone()
        return None if row is None else job_from_row(row)

    def create(
        self,
        *,
        run_id: str,
        task_id: str,
        client_token: str,
        episodes_total: int,
        files: dict[str, str],
        state: JobState = JobState.QUEUED,
        failure_reason: str = "",
    ) -> tuple[JobRecord, bool]:
        now = time.time()
        job_id = f"job-{uuid.uuid4().hex[:16]}"
        source = FailureSource.SUBMISSION if state is JobState.REJECTED else FailureSource.NONE
        running = state is JobState.RUNNING
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO jobs (job_id, run_id, task_id, client_token, state, "
                "episodes_total, failure_source, failure_reason, created, updated, files_json, "
                "heartbeat, owner, lease_until) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    run_id,
                    task_id,
                    client_token,
                    state.value,
                    episodes_total,
                    source.value,
                    failure_reason,
                    now,
                    now,
                    json.dumps(files, sort_keys=True),
                    now if running else 0.0,
                    self.owner if running else "",
                    now + self.lease_s if running else 0.0,
                ),
            )
            inserted = cur.rowcount == 1
        job = self.by_token(run_id, client_token)
        assert job is not None
        return job, not inserted

    def get(self, job_id: str) -> JobRecord | None:
        return self._one("WHERE job_id = ?", (job_id,))

    def by_token(self, run_id: str, client_token: str) -> JobRecord | None:
        return self._one("WHERE run_id = ? AND client_token = ?", (run_id, client_token))

    def latest_for_run(self, run_id: str) -> JobRecord | None:
        return self._one("WHERE run_id = ? ORDER BY seq DESC LIMIT 1", (run_id,))

    def count_for_run(self, run_id: str) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM jobs WHERE run_id = ? AND failure_source != ?",
                (run_id, FailureSource.INFRASTRUCTURE.value),
            ).fetchone()
        return int(n)

    def quota_used(self, run_id: str, free_infra_failures: int) -> int:
        with self._lock:
            ok, infra = self._db.execute(
                "SELECT COALESCE(SUM(failure_source != ?), 0), "
                "COALESCE(SUM(failure_source = ?), 0) FROM jobs WHERE run_id = ?",
                (FailureSource.INFRASTRUCTURE.value, FailureSource.INFRASTRUCTURE.value, run_id),
            ).fetchone()
        return int(ok) + max(0, int(infra) - free_infra_failures)

    def retries_used(self, run_id: str) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COALESCE(SUM(MAX(attempts - 1, 0)), 0) FROM jobs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        return int(n)

    def queue_position(self, job_id: str, *, same_run: bool = False) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT seq, state, run_id FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
            if row is None or row[1] != JobState.QUEUED.value:
                return 0
            scope, args = (" AND run_id = ?", (row[2],)) if same_run else ("", ())
            (ahead,) = self._db.execute(
                f"SELECT COUNT(*) FROM jobs WHERE state = ? AND seq < ?{scope}",
                (JobState.QUEUED.value, row[0], *args),
            ).fetchone()
        return int(ahead) + 1

    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        now = time.time()
        scope, args = ("", ()) if run_id is None else (" AND run_id = ?", (run_id,))
        with self._tx():
            row = self._db.execute(
                f"SELECT job_id FROM jobs WHERE state = ?{scope} ORDER BY seq LIMIT 1",
                (_QUEUED, *args),
            ).fetchone()
            if row is not None:
                self._db.execute(
                    "UPDATE jobs SET state = ?, owner = ?, lease_until = ?, "
                    "attempts = attempts + 1, heartbeat = ?, updated = ?, episodes_done = 0 "
                    "WHERE job_id = ?",
                    (_RUNNING, self.owner, now + self.lease_s, now, now, row[0]),
                )
        return None if row is None else self.get(row[0])

    def renew(self) -> set[str]:
        now = time.time()
        with self._tx():
            self._db.execute(
                "UPDATE jobs SET lease_until = ?, heartbeat = ? WHERE owner = ? AND state = ?",
                (now + self.lease_s, now, self.owner, _RUNNING),
            )
            rows = self._db.execute(
                "SELECT job_id FROM jobs WHERE owner = ? AND state = ?", (self.owner, _RUNNING)
            ).fetchall()
        return {r[0] for r in rows}

    def holds(self, job_id: str) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM jobs WHERE job_id = ? AND state = ? AND owner = ?",
                (job_id, _RUNNING, self.owner),
            ).fetchone()
        return row is not None

    def progress(self, job_id: str, episodes_done: int) -> bool:
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET episodes_done = ?, heartbeat = ?, updated = ?, lease_until = ? "
                "WHERE job_id = ? AND state = ? AND owner = ?",
                (episodes_done, now, now, now + self.lease_s, job_id, _RUNNING, self.owner),
            )
        return cur.rowcount == 1

    def heartbeat(self, job_id: str) -> bool:
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET heartbeat = ?, lease_until = ? "
                "WHERE job_id = ? AND state = ? AND owner = ?",
                (now, now + self.lease_s, job_id, _RUNNING, self.owner),
            )
        return cur.rowcount == 1

    def finish(
        self,
        job_id: str,
        state: JobState,
        *,
        owned: bool = False,
        failure_source: FailureSource = FailureSource.NONE,
        failure_reason: str = "",
        result_json: str | None = None,
        episodes_done: int | None = None,
    ) -> bool:
        if state not in TERMINAL_STATES:
            raise ValueError(f"{state} is not terminal")
        now = time.time()
        terminal = tuple(s.value for s in TERMINAL_STATES)
        marks = ", ".join("?" for _ in terminal)
        args: tuple[str, ...]
        if owned:
            cond, args = "state = ? AND owner = ?", (_RUNNING, self.owner)
        else:
            cond, args = f"state NOT IN ({marks})", terminal
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET state = ?, failure_source = ?, failure_reason = ?, "
                "result_json = COALESCE(?, result_json), "
                "episodes_done = COALESCE(?, episodes_done), updated = ?, lease_until = 0 "
                f"WHERE job_id = ? AND {cond}",
                (
                    state.value,
                    failure_source.value,
                    failure_reason,
                    result_json,
                    episodes_done,
                    now,
                    job_id,
                    *args,
                ),
            )
        return cur.rowcount == 1

    def requeue(self, job_id: str, reason: str) -> bool:
        return self._unclaim(job_id, reason, "attempts")

    def release(self, job_id: str) -> bool:
        return self._unclaim(job_id, None, "MAX(attempts - 1, 0)")

    def _unclaim(self, job_id: str, reason: str | None, attempts: str) -> bool:
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET state = ?, owner = '', lease_until = 0, episodes_done = 0, "
                f"failure_reason = COALESCE(?, failure_reason), attempts = {attempts}, "
                "updated = ? WHERE job_id = ? AND state = ? AND owner = ?",
                (_QUEUED, reason, now, job_id, _RUNNING, self.owner),
            )
        return cur.rowcount == 1

    def requeue_expired(
        self,
        *,
        run_id: str | None = None,
        fail_tokens: Collection[str] = (),
        fail_reason: str = "",
    ) -> ExpiredLeases:
        now = time.time()
        scope, args = ("", ()) if run_id is None else (" AND run_id = ?", (run_id,))
        requeued: list[str] = []
        failed: list[str] = []
        with self._tx():
            rows = self._db.execute(
                f"SELECT job_id, client_token FROM jobs WHERE state = ? AND lease_until < ?{scope} "
                "ORDER BY seq",
                (_RUNNING, now, *args),
            ).fetchall()
            for job_id, token in rows:
                if token in fail_tokens:
                    self._db.execute(
                        "UPDATE jobs SET state = ?, failure_source = ?, failure_reason = ?, "
                        "lease_until = 0, updated = ? WHERE job_id = ?",
                        (
                            JobState.FAILED.value,
                            FailureSource.INFRASTRUCTURE.value,
                            fail_reason,
                            now,
                            job_id,
                        ),
                    )
                    failed.append(job_id)
                else:
                    self._db.execute(
                        "UPDATE jobs SET state = ?, owner = '', lease_until = 0, "
                        "episodes_done = 0, updated = ?, failure_reason = ? WHERE job_id = ?",
                        (_QUEUED, now, REQUEUED_REASON, job_id),
                    )
                    requeued.append(job_id)
        return ExpiredLeases(requeued, failed)

    def cancel_run(self, run_id: str, reason: str) -> list[str]:
        now = time.time()
        with self._tx():
            rows = self._db.execute(
                "SELECT job_id FROM jobs WHERE run_id = ? AND state IN (?, ?) ORDER BY seq",
                (run_id, _QUEUED, _RUNNING),
            ).fetchall()
            self._db.execute(
                "UPDATE jobs SET state = ?, failure_source = ?, failure_reason = ?, "
                "lease_until = 0, updated = ? WHERE run_id = ? AND state IN (?, ?)",
                (
                    JobState.CANCELLED.value,
                    FailureSource.NONE.value,
                    reason,
                    now,
                    run_id,
                    _QUEUED,
                    _RUNNING,
                ),
            )
        return [r[0] for r in rows]

    def append_event(
        self, run_id: str, build: Callable[[int], str], *, held_job: str | None = None
    ) -> bool:
        with self._tx():
            if held_job is not None:
                row = self._db.execute(
                    "SELECT 1 FROM jobs WHERE job_id = ? AND state = ? AND owner = ?",
                    (held_job, _RUNNING, self.owner),
                ).fetchone()
                if row is None:
                    return False
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()
            self._db.execute(
                "INSERT INTO events (run_id, eval_seq, event_json) VALUES (?, ?, ?)",
                (run_id, int(n), build(int(n))),
            )
        return True

    def events(self, run_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT event_json FROM events WHERE run_id = ? ORDER BY eval_seq", (run_id,)
            ).fetchall()
        return [r[0] for r in rows]
