"""The SQLite job store (WAL), the embedded default: one file in the state dir.

The rules every store keeps are in :mod:`.base`. Here several evaluator processes of
one host share the file (every ``ale-robotics run`` embeds an evaluator on the same
default state dir; a shared ``evaluator serve`` may run beside them); each write is
one SQLite transaction (``BEGIN IMMEDIATE``: the file's write lock up front), and
times are this host's clock.

Schema history (``meta.schema_version``): 1, the original table; 2 adds
``owner`` and ``lease_until`` (an old file gains them when it is opened; its
RUNNING jobs then have an expired lease, like those of any dead process); 3 adds
the ``runs`` and ``practice_steps`` tables (before, each evaluator kept them in
files of its state dir: ``runs.json``, ``practice_steps.json``, which the
evaluator imports once, :mod:`.runs`, :mod:`.training_budget`).

Practice step charges (one per practice Step call) commit with
``synchronous=NORMAL``, every other write with ``FULL``: in WAL mode a NORMAL
commit is as atomic and as isolated (the budget check holds across processes
all the same) and survives the process being killed, but is flushed to disk with
the next FULL commit or checkpoint rather than at once, so a power loss may forget
the last moments of counting (files before schema 3: up to a second). An fsync on
every Step of every practice session would cost more than the Step.

A fault of the storage under the file (a full disk, an I/O error, a read-only or
corrupt file, a lock held past the busy timeout) leaves every method as
:class:`.base.StoreUnavailable` (UNAVAILABLE), as the PostgreSQL store's lost
connections do, never as a raw ``sqlite3`` error: the evaluator's callers then tell an
infrastructure failure from a bug (a malformed statement stays a ``sqlite3`` error, a
bug, INTERNAL). The translation is :class:`_StoreLock`'s, the one lock every statement
runs under.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from ale_robotics.evaluator.store.base import (
    DEFAULT_LEASE_S,
    JOB_COLUMNS,
    REQUEUED_REASON,
    RUN_COLUMNS,
    TERMINAL_STATES,
    EventMaker,
    ExpiredLeases,
    FailureSource,
    JobRecord,
    JobState,
    JobStore,
    RunRecord,
    StoreUnavailable,
    check_job_id,
    check_step_count,
    check_token_sha256,
    job_from_row,
    new_job_id,
    run_from_row,
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
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    token_sha256 TEXT NOT NULL,
    submission_dir TEXT NOT NULL DEFAULT '',
    opened_unix REAL NOT NULL,
    closed_unix REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_open_token ON runs (token_sha256) WHERE closed_unix = 0;
CREATE TABLE IF NOT EXISTS practice_steps (
    run_id TEXT PRIMARY KEY,
    agent_steps INTEGER NOT NULL DEFAULT 0 CHECK (agent_steps >= 0)
);
"""
_SCHEMA_VERSION = 3
_ADDED_COLUMNS = {
    # schema 2: job ownership
    "owner": "TEXT NOT NULL DEFAULT ''",
    "lease_until": "REAL NOT NULL DEFAULT 0",
}
"""Columns added since schema 1, each with the definition ALTER TABLE gives an old file.
(Tables added since, schema 3's, are created by :data:`_SCHEMA`'s ``IF NOT EXISTS``.)"""
_RUNNING = JobState.RUNNING.value
_QUEUED = JobState.QUEUED.value

_STORAGE_FAULTS = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_NOTADB,
    }
)
"""Primary result codes that say the storage failed, not the statement (which would be
a bug): see https://sqlite.org/rescode.html."""


def storage_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite reporting a fault of the storage (disk full, I/O error,
    read-only or corrupt file, busy past the timeout) rather than of the statement."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.DatabaseError)
        and code is not None
        and (code & 0xFF) in _STORAGE_FAULTS
    )


def _unavailable(path: Path, exc: sqlite3.DatabaseError) -> StoreUnavailable:
    return StoreUnavailable(
        f"the job store {path} failed: {exc} (a fault of the evaluator's storage: free "
        "space on its disk or fix the file, then retry)",
        fault=f"the job store failed: {exc}",  # SQLite's words name no path
    )


class _StoreLock:
    """The lock that guards the connection; a storage fault raised under it leaves as
    :class:`.base.StoreUnavailable` (the one place SQLite's faults are translated)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._path = path

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()
        if isinstance(exc, sqlite3.DatabaseError) and storage_fault(exc):
            raise _unavailable(self._path, exc) from exc


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
        self._lock = _StoreLock(path)
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._wal()
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            if storage_fault(exc):
                raise _unavailable(path, exc) from exc
            raise
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
    def _tx(self, *, durable: bool = True) -> Iterator[None]:
        """One write transaction under the lock (BEGIN IMMEDIATE: the write lock up front).

        ``durable`` False: committed with ``synchronous=NORMAL`` (practice step
        charges; see the module docstring), the connection back to FULL afterwards.
        """
        with self._lock:
            if not durable:
                self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield
                    self._db.execute("COMMIT")
                except BaseException:
                    # SQLite may have rolled back already (a full disk, an I/O error at
                    # COMMIT): the original error is the one to raise
                    if self._db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            self._db.execute("ROLLBACK")
                    raise
            finally:
                if not durable:
                    self._db.execute("PRAGMA synchronous=FULL")

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
        job_id: str | None = None,
    ) -> tuple[JobRecord, bool]:
        now = time.time()
        job_id = new_job_id() if job_id is None else check_job_id(job_id)
        source = FailureSource.SUBMISSION if state is JobState.REJECTED else FailureSource.NONE
        running = state is JobState.RUNNING
        with self._tx():
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
            row = self._db.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE run_id = ? AND client_token = ?",
                (run_id, client_token),
            ).fetchone()
        if row is None:  # ignored for the id, not the token: another job has that id
            raise ValueError(f"job_id {job_id!r} is taken by another job")
        return job_from_row(row), not inserted

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
        self,
        run_id: str,
        make: EventMaker,
        *,
        held_job: str | None = None,
        preamble: Sequence[EventMaker] | None = None,
    ) -> bool:
        # BEGIN IMMEDIATE holds the file's write lock from the first read: every other
        # writer, of any process, waits, so "no event yet" still holds at the insert
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
            seq = int(n)
            makers = [*(preamble or ()), make] if seq == 0 else [make]
            for maker in makers:
                self._db.execute(
                    "INSERT INTO events (run_id, eval_seq, event_json) VALUES (?, ?, ?)",
                    (run_id, seq, maker(seq)),
                )
                seq += 1
        return True

    def events(self, run_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT event_json FROM events WHERE run_id = ? ORDER BY eval_seq", (run_id,)
            ).fetchall()
        return [r[0] for r in rows]

    # ------------------------------------------------------------------ runs --

    def add_run(self, run: RunRecord) -> bool:
        check_token_sha256(run.token_sha256)
        with self._tx():
            cur = self._db.execute(
                f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                (
                    run.run_id,
                    run.task_id,
                    run.token_sha256,
                    run.submission_dir,
                    run.opened_unix,
                    run.closed_unix,
                ),
            )
        return cur.rowcount == 1

    def _run_where(self, where: str, args: tuple[Any, ...]) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE {where}", args).fetchone()
        return None if row is None else run_from_row(row)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._run_where("run_id = ?", (run_id,))

    def open_run_by_token(self, token_sha256: str) -> RunRecord | None:
        return self._run_where("token_sha256 = ? AND closed_unix = 0", (token_sha256,))

    def revoke_run(self, run_id: str) -> RunRecord | None:
        with self._tx():
            self._db.execute(
                "UPDATE runs SET closed_unix = ? WHERE run_id = ? AND closed_unix = 0",
                (time.time(), run_id),
            )
            row = self._db.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else run_from_row(row)

    # -------------------------------------------------------- practice steps --

    def practice_steps(self, run_id: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT agent_steps FROM practice_steps WHERE run_id = ?", (run_id,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def charge_practice_steps(self, run_id: str, n: int, *, limit: int | None) -> tuple[bool, int]:
        if n < 0:
            raise ValueError(f"cannot charge a negative number of practice steps ({n})")
        # one write transaction: no other process charges between the read and the write
        with self._tx(durable=False):
            row = self._db.execute(
                "SELECT agent_steps FROM practice_steps WHERE run_id = ?", (run_id,)
            ).fetchone()
            used = 0 if row is None else int(row[0])
            if limit is not None and used + n > limit:
                return False, used
            self._db.execute(
                "INSERT INTO practice_steps (run_id, agent_steps) VALUES (?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET agent_steps = excluded.agent_steps",
                (run_id, used + n),
            )
        return True, used + n

    def import_practice_steps(self, counts: Mapping[str, int]) -> None:
        rows = [(run_id, check_step_count(run_id, n)) for run_id, n in counts.items()]
        with self._tx():
            self._db.executemany(
                "INSERT INTO practice_steps (run_id, agent_steps) VALUES (?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET "
                "agent_steps = MAX(agent_steps, excluded.agent_steps)",
                rows,
            )
