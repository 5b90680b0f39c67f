"""The SQLite job store (WAL): the one place a batch job's state lives.

Every transition is a single transaction, so a killed evaluator leaves each job
in a state it really reached.

Several evaluator processes may share one store (every ``ale-robotics run``
embeds an evaluator on the same default state dir; a shared ``evaluator serve``
may run beside them), so a running job belongs to the process that claimed it:

* Each :class:`JobStore` acts for one **owner** (``host:pid:random``,
  :func:`new_owner_id`). :meth:`JobStore.claim_next` marks the job RUNNING with
  that owner and a **lease** (``lease_until``, ``lease_s`` from now), which the
  owner renews while it works (:meth:`JobStore.renew`, :meth:`JobStore.heartbeat`).
* Only a RUNNING job whose lease has expired belongs to nobody any more:
  :meth:`JobStore.requeue_expired` puts it back in the queue (to be re-run from
  its snapshot; the inputs are frozen, so the result is the same). A live
  process's jobs are never touched, however many evaluators start beside it.
* Progress, heartbeat, requeue and an owner's finish are conditional on the
  caller still holding the job (``WHERE owner = ?``) and say whether they won:
  a process that lost its lease (paused past it, or the job was cancelled)
  cannot overwrite what the new owner, or the cancellation, wrote.

Schema history (``meta.schema_version``): 1, the original table; 2 adds
``owner`` and ``lease_until`` (an old file gains them when it is opened; its
RUNNING jobs then have an expired lease, like those of any dead process).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFAULT_LEASE_S",
    "TERMINAL_STATES",
    "ExpiredLeases",
    "FailureSource",
    "JobRecord",
    "JobState",
    "JobStore",
    "new_owner_id",
]

DEFAULT_LEASE_S = 15.0
"""How long a claim lasts without renewal. The owner renews every third of it, so a
process must miss two renewals in a row (stopped, killed, hung) before another
evaluator may take its job over; and a killed process's job waits at most this long."""


def new_owner_id() -> str:
    """A process's owner id: host and pid for the operator, random so a reused pid differs."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


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
    owner: str = ""
    """The evaluator process holding the job while RUNNING (:func:`new_owner_id`); kept
    afterwards to show which one ran it last. Empty: never claimed, or requeued."""
    lease_until: float = 0.0
    """Unix time the owner's claim runs out unless renewed; 0 when not RUNNING."""

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
_COLUMNS = (
    "job_id, run_id, task_id, client_token, state, episodes_done, episodes_total, "
    "failure_source, failure_reason, heartbeat, created, updated, attempts, files_json, "
    "result_json, owner, lease_until"
)
_RUNNING = JobState.RUNNING.value
_QUEUED = JobState.QUEUED.value


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
        owner=row[15],
        lease_until=row[16],
    )


@dataclass(frozen=True)
class ExpiredLeases:
    """What :meth:`JobStore.requeue_expired` did with the jobs whose lease ran out."""

    requeued: list[str]
    """Back in the queue, to be re-run from their snapshots."""
    failed: list[str]
    """Ended FAILED (infrastructure) instead: jobs that cannot be re-run (``fail_tokens``)."""


class JobStore:
    """Thread-safe access to ``jobs.sqlite3``; one connection guarded by a lock.

    ``owner`` is the evaluator process this store acts for (default: a new
    :func:`new_owner_id`) and ``lease_s`` how long its claims last unrenewed.
    Other processes open their own store on the same file.
    """

    def __init__(
        self, path: Path, *, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        if lease_s <= 0:
            raise ValueError(f"lease_s must be positive, got {lease_s}")
        self.owner = owner or new_owner_id()
        self.lease_s = lease_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._migrate()

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

        A job created RUNNING (an eval session's row) is held by this store's
        owner from the start, under a lease like a claimed one.
        Returns ``(job, deduplicated)``.
        """
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

    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        """Atomically move the oldest queued job to RUNNING, held by this owner; return it.

        ``run_id``: only that run's jobs (an evaluator embedded in one run must never
        run another's); None: any run's (a shared evaluator).
        """
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
        """Extend the lease of every job this owner holds; returns their ids.

        The evaluator calls it on a timer of its own (every third of the lease), so
        a job keeps its lease however long one shard or an idle eval session takes.
        A job missing from the answer is no longer this owner's (its lease expired
        and it was requeued, or it was cancelled).
        """
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
        """Whether this owner still holds the job (RUNNING, claimed by it)."""
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM jobs WHERE job_id = ? AND state = ? AND owner = ?",
                (job_id, _RUNNING, self.owner),
            ).fetchone()
        return row is not None

    def progress(self, job_id: str, episodes_done: int) -> bool:
        """Record episodes done (and renew the lease); False: the job is not this owner's."""
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET episodes_done = ?, heartbeat = ?, updated = ?, lease_until = ? "
                "WHERE job_id = ? AND state = ? AND owner = ?",
                (episodes_done, now, now, now + self.lease_s, job_id, _RUNNING, self.owner),
            )
        return cur.rowcount == 1

    def heartbeat(self, job_id: str) -> bool:
        """Renew one job's lease; False: the job is not this owner's any more."""
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
        """End a job in a terminal ``state``; returns whether this call ended it.

        ``owned``: the caller ran the job, so it ends only while still RUNNING under
        this store's owner (a lost lease or a cancellation wins). Without it, any job
        not yet terminal ends (one nobody runs: rejected on arrival, failed after its
        evaluator died). A terminal job is never changed.
        """
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
        """Put a job this owner holds back in the queue after an infrastructure failure.

        False: it was not this owner's any more (nothing changed).
        """
        return self._unclaim(job_id, reason, "attempts")

    def release(self, job_id: str) -> bool:
        """Give a job claimed but never started back to the queue, attempt not counted
        (an evaluator stopping between claim and start)."""
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
        """Requeue the RUNNING jobs whose lease has expired (their evaluator is gone).

        ``run_id``: only that run's (an embedded evaluator); None: every run's.
        Jobs whose client token is in ``fail_tokens`` cannot be re-run (an eval
        session's envs died with its process): they end FAILED (infrastructure,
        ``fail_reason``) in the same transaction, so no runner can claim them first.
        A job with a live lease is never touched.
        """
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
                        "episodes_done = 0, updated = ?, failure_reason = "
                        "'requeued: the evaluator running it stopped renewing its lease' "
                        "WHERE job_id = ?",
                        (_QUEUED, now, job_id),
                    )
                    requeued.append(job_id)
        return ExpiredLeases(requeued, failed)

    def cancel_run(self, run_id: str, reason: str) -> list[str]:
        """End the run's QUEUED and RUNNING jobs CANCELLED (whoever holds them); their ids.

        A process running one finds out at its next renewal or write, which it loses.
        """
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
        """Store the run's next trusted-evaluator event; ``build`` gets its eval_seq.

        Sequence allocation and insertion share one transaction, so concurrent
        jobs of a run can never produce a gap or a duplicate eval_seq. With
        ``held_job``, the event is stored only while this owner holds that job,
        checked in the same transaction: a runner that lost its job writes no more
        of its events. Returns whether the event was stored.
        """
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
