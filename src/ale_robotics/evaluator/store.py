"""The SQLite job store (WAL): the one place a batch job's state lives.

Every transition is a single transaction, so a killed evaluator leaves each job
in a state it really reached. On start, jobs found ``RUNNING`` belong to a dead
process: :meth:`JobStore.recover` puts them back in the queue to be re-run from
their snapshot (the inputs are frozen, so the result is the same).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["TERMINAL_STATES", "FailureSource", "JobRecord", "JobState", "JobStore"]


class JobState(StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.REJECTED, JobState.TIMED_OUT, JobState.CANCELLED}
)


class FailureSource(StrEnum):
    NONE = ""
    SUBMISSION = "submission"
    INFRASTRUCTURE = "infrastructure"


class JobRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: str
    run_id: str
    task_id: str
    client_token: str
    state: JobState
    episodes_done: int
    episodes_total: int
    failure_source: FailureSource
    failure_reason: str
    heartbeat: float
    created: float
    updated: float
    attempts: int
    files: dict[str, str]
    """Snapshot file name -> SHA-256, recorded at submission."""
    result_json: str | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


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
_SCHEMA_VERSION = "1"
_COLUMNS = (
    "job_id, run_id, task_id, client_token, state, episodes_done, episodes_total, "
    "failure_source, failure_reason, heartbeat, created, updated, attempts, files_json, result_json"
)


def _row_to_job(row: tuple[Any, ...]) -> JobRecord:
    return JobRecord(
        job_id=row[0],
        run_id=row[1],
        task_id=row[2],
        client_token=row[3],
        state=JobState(row[4]),
        episodes_done=row[5],
        episodes_total=row[6],
        failure_source=FailureSource(row[7]),
        failure_reason=row[8],
        heartbeat=row[9],
        created=row[10],
        updated=row[11],
        attempts=row[12],
        files=json.loads(row[13]),
        result_json=row[14],
    )


class JobStore:
    """Thread-safe access to ``jobs.sqlite3``; one connection guarded by a lock."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._db.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
            (_SCHEMA_VERSION,),
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _one(self, sql: str, args: tuple[Any, ...]) -> JobRecord | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM jobs {sql}", args).fetchone()
        return None if row is None else _row_to_job(row)

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
        """Insert a job, or return the existing one for (run_id, client_token).

        Returns ``(job, deduplicated)``.
        """
        now = time.time()
        job_id = f"job-{uuid.uuid4().hex[:16]}"
        source = FailureSource.SUBMISSION if state is JobState.REJECTED else FailureSource.NONE
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO jobs (job_id, run_id, task_id, client_token, state, "
                "episodes_total, failure_source, failure_reason, created, updated, files_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        """Submissions that count against a run's quota (infrastructure failures do not)."""
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM jobs WHERE run_id = ? AND failure_source != ?",
                (run_id, FailureSource.INFRASTRUCTURE.value),
            ).fetchone()
        return int(n)

    def quota_used(self, run_id: str, free_infra_failures: int) -> int:
        """Submissions that count against a run's ``max_submissions``.

        Every job counts (queued, running, scored, rejected, failed by the
        submission) except infrastructure failures, of which only the first
        ``free_infra_failures`` are free: beyond them each counts too. So however
        many jobs the infrastructure fails, a run with quota ``q`` gets at most
        ``q + free_infra_failures`` jobs evaluated and at most ``q`` verdicts on its
        hidden episodes; "fail it as infrastructure, then submit again" cannot buy
        more evaluations. (:meth:`count_for_run` is the same count with no free
        failures counted at all.)
        """
        with self._lock:
            ok, infra = self._db.execute(
                "SELECT COALESCE(SUM(failure_source != ?), 0), "
                "COALESCE(SUM(failure_source = ?), 0) FROM jobs WHERE run_id = ?",
                (FailureSource.INFRASTRUCTURE.value, FailureSource.INFRASTRUCTURE.value, run_id),
            ).fetchone()
        return int(ok) + max(0, int(infra) - free_infra_failures)

    def retries_used(self, run_id: str) -> int:
        """Re-runs a run's jobs have had: every attempt after a job's first.

        A job is attempted again only after an infrastructure failure (a crashed
        worker, an internal error, an evaluator restart), so this is the run's
        spend of ``max_infra_retries_per_run``, counted from the durable attempt
        numbers (a restart cannot reset it).
        """
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COALESCE(SUM(MAX(attempts - 1, 0)), 0) FROM jobs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        return int(n)

    def queue_position(self, job_id: str) -> int:
        """0 when running or done; otherwise 1 + the number of queued jobs ahead of it."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, state FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
            if row is None or row[1] != JobState.QUEUED.value:
                return 0
            (ahead,) = self._db.execute(
                "SELECT COUNT(*) FROM jobs WHERE state = ? AND seq < ?",
                (JobState.QUEUED.value, row[0]),
            ).fetchone()
        return int(ahead) + 1

    def claim_next(self) -> JobRecord | None:
        """Atomically move the oldest queued job to RUNNING and return it."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT job_id FROM jobs WHERE state = ? ORDER BY seq LIMIT 1",
                    (JobState.QUEUED.value,),
                ).fetchone()
                if row is not None:
                    self._db.execute(
                        "UPDATE jobs SET state = ?, attempts = attempts + 1, heartbeat = ?, "
                        "updated = ?, episodes_done = 0 WHERE job_id = ?",
                        (JobState.RUNNING.value, now, now, row[0]),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return None if row is None else self.get(row[0])

    def progress(self, job_id: str, episodes_done: int) -> None:
        now = time.time()
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET episodes_done = ?, heartbeat = ?, updated = ? "
                "WHERE job_id = ? AND state = ?",
                (episodes_done, now, now, job_id, JobState.RUNNING.value),
            )

    def heartbeat(self, job_id: str) -> None:
        now = time.time()
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET heartbeat = ? WHERE job_id = ? AND state = ?",
                (now, job_id, JobState.RUNNING.value),
            )

    def finish(
        self,
        job_id: str,
        state: JobState,
        *,
        failure_source: FailureSource = FailureSource.NONE,
        failure_reason: str = "",
        result_json: str | None = None,
        episodes_done: int | None = None,
    ) -> None:
        if state not in TERMINAL_STATES:
            raise ValueError(f"{state} is not terminal")
        now = time.time()
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state = ?, failure_source = ?, failure_reason = ?, "
                "result_json = COALESCE(?, result_json), "
                "episodes_done = COALESCE(?, episodes_done), updated = ? WHERE job_id = ?",
                (
                    state.value,
                    failure_source.value,
                    failure_reason,
                    result_json,
                    episodes_done,
                    now,
                    job_id,
                ),
            )

    def requeue(self, job_id: str, reason: str) -> None:
        """Put a job whose attempt failed for infrastructure reasons back in the queue."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state = ?, failure_reason = ?, episodes_done = 0, updated = ? "
                "WHERE job_id = ?",
                (JobState.QUEUED.value, reason, now, job_id),
            )

    def recover(self) -> list[str]:
        """Requeue jobs left RUNNING by a process that died; returns their ids."""
        now = time.time()
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id FROM jobs WHERE state = ?", (JobState.RUNNING.value,)
            ).fetchall()
            self._db.execute(
                "UPDATE jobs SET state = ?, episodes_done = 0, updated = ?, "
                "failure_reason = 'requeued after an evaluator restart' WHERE state = ?",
                (JobState.QUEUED.value, now, JobState.RUNNING.value),
            )
        return [r[0] for r in rows]

    def append_event(self, run_id: str, build: Callable[[int], str]) -> None:
        """Store the run's next trusted-evaluator event; ``build`` gets its eval_seq.

        Sequence allocation and insertion share one transaction, so concurrent
        jobs of a run can never produce a gap or a duplicate eval_seq.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (n,) = self._db.execute(
                    "SELECT COUNT(*) FROM events WHERE run_id = ?", (run_id,)
                ).fetchone()
                self._db.execute(
                    "INSERT INTO events (run_id, eval_seq, event_json) VALUES (?, ?, ?)",
                    (run_id, int(n), build(int(n))),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def events(self, run_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT event_json FROM events WHERE run_id = ? ORDER BY eval_seq", (run_id,)
            ).fetchall()
        return [r[0] for r in rows]
