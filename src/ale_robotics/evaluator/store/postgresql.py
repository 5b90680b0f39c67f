"""The PostgreSQL job store: evaluator replicas on several hosts share one database.

The rules are those of every store (:mod:`.base`); this module says how
PostgreSQL keeps them when the writers are processes on different machines.

Clock. Every time the store writes or compares (``created``, ``heartbeat``,
``lease_until``) is the database server's (``statement_timestamp()`` in the SQL,
never the caller's ``time.time()``), so replicas whose clocks disagree still agree
on whose lease has run out.

Locking (all transactions READ COMMITTED):

* :meth:`~PostgresJobStore.claim_next` takes the oldest queued job with
  ``SELECT ... FOR UPDATE SKIP LOCKED`` and marks it RUNNING in the same
  statement: replicas claiming at once skip each other's row instead of waiting
  for it, and a row another replica claimed meanwhile fails the re-checked
  ``state = 'QUEUED'`` and is skipped too. Each job goes to one replica.
* :meth:`~PostgresJobStore.append_event` allocates a run's next ``eval_seq`` under
  ``pg_advisory_xact_lock(namespace, hashtext(run_id))``, held until its commit:
  one writer per run at a time (runs whose hashes collide just wait for each
  other), the next one reads ``MAX(eval_seq)`` after the previous commit, so
  there is no gap and no duplicate; ``PRIMARY KEY (run_id, eval_seq)`` is the
  backstop. With ``held_job``, the job row is read ``FOR SHARE`` first, so a
  cancellation or a takeover cannot commit between the check and the insert.
* :meth:`~PostgresJobStore.requeue_expired` locks the expired rows ``FOR UPDATE
  SKIP LOCKED`` (a row being renewed or claimed right now is left for the next
  pass, a third of a lease later); :meth:`~PostgresJobStore.cancel_run` locks the
  run's rows ``FOR UPDATE`` (waiting for a claim or an event in flight). Both lock
  in ``seq`` order, so they cannot deadlock each other; should PostgreSQL still
  report a deadlock or a serialization failure, the transaction (rolled back,
  nothing written) is retried.
* Schema: created or migrated when a store opens, in one transaction under
  ``pg_advisory_xact_lock`` on a key of its own, so replicas starting together
  apply each migration once; ``schema_version`` lists the versions applied
  (:data:`.pg_schema.MIGRATIONS`), and a newer release's version is never lowered.

Connections. One psycopg connection per store (autocommit, each method one short
transaction), used under a lock, as the SQLite store uses its one connection.
Why not a pool: psycopg_pool is a separate package, and an evaluator's store calls
are short and already serialized per process; why not one connection per thread:
the gRPC server runs many short-lived worker threads, each would keep a server
connection open (PostgreSQL's ``max_connections`` is shared by every replica),
and none could be closed from :meth:`~PostgresJobStore.close`. So one replica
holds one connection. A connection lost (server restart, network) makes that call
raise :class:`.base.StoreUnavailable` (never retried here: it may have committed)
and the next call reconnects. A replica stalled inside a transaction cannot hold
others' locks for long: the session's ``idle_in_transaction_session_timeout``
ends it.

Give the evaluator a database (or a schema, ``?options=-csearch_path%3DNAME``)
of its own: the tables are ``jobs``, ``events``, ``runs``, ``practice_steps`` and
``schema_version``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

import ale_robotics.evaluator.store.pg_schema as pg_schema
from ale_robotics.errors import InvalidArgumentError
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
    redacted,
    run_from_row,
)

__all__ = ["PostgresJobStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Cursor = psycopg.Cursor[tuple[Any, ...]]

_NOW = "date_part('epoch', statement_timestamp())"
"""Now, in Unix seconds of the database server's clock (double precision)."""
_EVENT_LOCK_NS = 0x414C4545
"""First key of a run's event lock (two int4 keys: a key space apart from the one-bigint
key of :data:`.pg_schema.MIGRATION_LOCK`)."""
_RETRIES = 5
"""Attempts at a transaction PostgreSQL aborted as a deadlock or serialization failure."""
_IDLE_IN_TX_MIN_S = 10.0
_RUNNING = JobState.RUNNING.value
_QUEUED = JobState.QUEUED.value
_TERMINAL = sorted(s.value for s in TERMINAL_STATES)


class PostgresJobStore(JobStore):
    """A job store in the PostgreSQL database at ``url`` (a libpq connection URI).

    Creates or migrates the schema when it opens. Raises
    :class:`.base.StoreUnavailable` when the server cannot be reached (at open or
    on any later call) and InvalidArgumentError for a malformed URL.
    """

    SCHEMA_VERSION = pg_schema.SCHEMA_VERSION

    def __init__(
        self, url: str, *, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        super().__init__(owner=owner, lease_s=lease_s)
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise InvalidArgumentError(
                f"job store {redacted(url)!r} is not a PostgreSQL connection URI: {exc}"
            ) from None
        self.url = url
        self._params = params
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._closed = False
        self._migrate()

    def __repr__(self) -> str:
        return f"PostgresJobStore({redacted(self.url)!r}, owner={self.owner!r})"

    # ----------------------------------------------------------- connection --

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        extra: dict[str, Any] = {}
        if "connect_timeout" not in self._params:
            extra["connect_timeout"] = 10
        if "application_name" not in self._params:
            extra["application_name"] = f"ale-robotics evaluator {self.owner}"[:63]
        try:
            conn = psycopg.connect(self.url, autocommit=True, **extra)
            idle_ms = int(max(self.lease_s, _IDLE_IN_TX_MIN_S) * 1000)
            conn.execute(
                "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                (str(idle_ms),),
            )
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot connect to the job store {redacted(self.url)}: {_first_line(exc)}"
            ) from exc
        return conn

    def _run(self, fn: Callable[[Cursor], T], *, tx: bool = True) -> T:
        """``fn`` in one transaction (``tx``) or one autocommitted statement, under the lock."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the job store was closed")
            for attempt in itertools.count(1):
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._conn = self._connect()
                conn = self._conn
                try:
                    if not tx:
                        with conn.cursor() as cur:
                            return fn(cur)
                    with conn.transaction(), conn.cursor() as cur:
                        return fn(cur)
                except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as exc:
                    if attempt >= _RETRIES:
                        raise StoreUnavailable(
                            f"the job store kept aborting a transaction: {_first_line(exc)}"
                        ) from exc
                    log.debug("job store transaction retried: %s", _first_line(exc))
                except psycopg.OperationalError as exc:
                    if conn.broken or conn.closed:
                        self._conn = None
                        with contextlib.suppress(psycopg.Error):  # already gone
                            conn.close()
                    raise StoreUnavailable(
                        f"the job store {redacted(self.url)} failed: {_first_line(exc)}"
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _migrate(self) -> None:
        """Create the schema, or bring an older one up to the newest version."""
        for version in self._run(lambda cur: pg_schema.migrate(cur, _NOW)):
            log.info("job store %s: schema version %d applied", redacted(self.url), version)

    def schema_version(self) -> int:
        def read(cur: Cursor) -> int:
            cur.execute("SELECT MAX(version) FROM schema_version")
            return int(_scalar(cur))

        return self._run(read, tx=False)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):  # already gone
                    self._conn.close()
                self._conn = None

    # ------------------------------------------------------------------ reads --

    def _one(self, where: str, args: tuple[Any, ...]) -> JobRecord | None:
        def read(cur: Cursor) -> JobRecord | None:
            cur.execute(f"SELECT {JOB_COLUMNS} FROM jobs {where}", args)
            row = cur.fetchone()
            return None if row is None else job_from_row(row)

        return self._run(read, tx=False)

    def _count(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        def read(cur: Cursor) -> tuple[Any, ...]:
            cur.execute(sql, args)
            row = cur.fetchone()
            assert row is not None
            return row

        return self._run(read, tx=False)

    def get(self, job_id: str) -> JobRecord | None:
        return self._one("WHERE job_id = %s", (job_id,))

    def by_token(self, run_id: str, client_token: str) -> JobRecord | None:
        return self._one("WHERE run_id = %s AND client_token = %s", (run_id, client_token))

    def latest_for_run(self, run_id: str) -> JobRecord | None:
        return self._one("WHERE run_id = %s ORDER BY seq DESC LIMIT 1", (run_id,))

    def count_for_run(self, run_id: str) -> int:
        (n,) = self._count(
            "SELECT COUNT(*) FROM jobs WHERE run_id = %s AND failure_source != %s",
            (run_id, FailureSource.INFRASTRUCTURE.value),
        )
        return int(n)

    def quota_used(self, run_id: str, free_infra_failures: int) -> int:
        infra = FailureSource.INFRASTRUCTURE.value
        ok, failed = self._count(
            "SELECT COUNT(*) FILTER (WHERE failure_source != %s), "
            "COUNT(*) FILTER (WHERE failure_source = %s) FROM jobs WHERE run_id = %s",
            (infra, infra, run_id),
        )
        return int(ok) + max(0, int(failed) - free_infra_failures)

    def retries_used(self, run_id: str) -> int:
        (n,) = self._count(
            "SELECT COALESCE(SUM(GREATEST(attempts - 1, 0)), 0) FROM jobs WHERE run_id = %s",
            (run_id,),
        )
        return int(n)

    def queue_position(self, job_id: str, *, same_run: bool = False) -> int:
        scope = " AND q.run_id = j.run_id" if same_run else ""

        def read(cur: Cursor) -> int:
            cur.execute(
                "SELECT CASE WHEN j.state = %s THEN 1 + (SELECT COUNT(*) FROM jobs q "
                f"WHERE q.state = %s AND q.seq < j.seq{scope}) ELSE 0 END FROM jobs j "
                "WHERE job_id = %s",
                (_QUEUED, _QUEUED, job_id),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row[0])

        return self._run(read, tx=False)

    def holds(self, job_id: str) -> bool:
        def read(cur: Cursor) -> bool:
            cur.execute(
                "SELECT 1 FROM jobs WHERE job_id = %s AND state = %s AND owner = %s",
                (job_id, _RUNNING, self.owner),
            )
            return cur.fetchone() is not None

        return self._run(read, tx=False)

    def events(self, run_id: str) -> list[str]:
        def read(cur: Cursor) -> list[str]:
            cur.execute(
                "SELECT event_json FROM events WHERE run_id = %s ORDER BY eval_seq", (run_id,)
            )
            return [str(r[0]) for r in cur.fetchall()]

        return self._run(read, tx=False)

    # ------------------------------------------------------------ transitions --

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
        job_id = new_job_id() if job_id is None else check_job_id(job_id)
        source = FailureSource.SUBMISSION if state is JobState.REJECTED else FailureSource.NONE
        running = state is JobState.RUNNING
        # held from the start (an eval session's row): heartbeat now, lease from now
        heartbeat, lease = (_NOW, f"{_NOW} + %s") if running else ("0", "0")
        lease_args: tuple[float, ...] = (self.lease_s,) if running else ()

        def insert(cur: Cursor) -> tuple[JobRecord, bool]:
            cur.execute(
                "INSERT INTO jobs (job_id, run_id, task_id, client_token, state, "
                "episodes_total, failure_source, failure_reason, created, updated, files_json, "
                "heartbeat, owner, lease_until) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, {_NOW}, {_NOW}, %s, {heartbeat}, %s, "
                f"{lease}) ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}",
                (
                    job_id,
                    run_id,
                    task_id,
                    client_token,
                    state.value,
                    episodes_total,
                    source.value,
                    failure_reason,
                    json.dumps(files, sort_keys=True),
                    self.owner if running else "",
                    *lease_args,
                ),
            )
            row = cur.fetchone()
            if row is not None:
                return job_from_row(row), False
            cur.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE run_id = %s AND client_token = %s",
                (run_id, client_token),
            )
            existing = cur.fetchone()
            if existing is None:  # the conflict was on the id, not the token
                raise ValueError(f"job_id {job_id!r} is taken by another job")
            return job_from_row(existing), True

        return self._run(insert)

    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        scope, args = ("", ()) if run_id is None else (" AND run_id = %s", (run_id,))

        def claim(cur: Cursor) -> JobRecord | None:
            cur.execute(
                "WITH next AS ("
                f"SELECT seq FROM jobs WHERE state = %s{scope} ORDER BY seq LIMIT 1 "
                "FOR UPDATE SKIP LOCKED) "
                f"UPDATE jobs SET state = %s, owner = %s, lease_until = {_NOW} + %s, "
                f"attempts = attempts + 1, heartbeat = {_NOW}, updated = {_NOW}, "
                "episodes_done = 0 "
                f"FROM next WHERE jobs.seq = next.seq RETURNING {_qualified('jobs')}",
                (_QUEUED, *args, _RUNNING, self.owner, self.lease_s),
            )
            row = cur.fetchone()
            return None if row is None else job_from_row(row)

        return self._run(claim)

    def renew(self) -> set[str]:
        def renew(cur: Cursor) -> set[str]:
            cur.execute(
                f"UPDATE jobs SET lease_until = {_NOW} + %s, heartbeat = {_NOW} "
                "WHERE owner = %s AND state = %s RETURNING job_id",
                (self.lease_s, self.owner, _RUNNING),
            )
            return {str(r[0]) for r in cur.fetchall()}

        return self._run(renew)

    def _update(self, sql: str, args: tuple[Any, ...]) -> bool:
        """One conditional UPDATE; whether it changed a row."""

        def update(cur: Cursor) -> bool:
            cur.execute(sql, args)
            return cur.rowcount == 1

        return self._run(update)

    def progress(self, job_id: str, episodes_done: int) -> bool:
        return self._update(
            f"UPDATE jobs SET episodes_done = %s, heartbeat = {_NOW}, updated = {_NOW}, "
            f"lease_until = {_NOW} + %s WHERE job_id = %s AND state = %s AND owner = %s",
            (episodes_done, self.lease_s, job_id, _RUNNING, self.owner),
        )

    def heartbeat(self, job_id: str) -> bool:
        return self._update(
            f"UPDATE jobs SET heartbeat = {_NOW}, lease_until = {_NOW} + %s "
            "WHERE job_id = %s AND state = %s AND owner = %s",
            (self.lease_s, job_id, _RUNNING, self.owner),
        )

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
        cond: str
        cond_args: tuple[Any, ...]
        if owned:
            cond, cond_args = "state = %s AND owner = %s", (_RUNNING, self.owner)
        else:
            cond, cond_args = "state != ALL(%s)", (_TERMINAL,)
        return self._update(
            "UPDATE jobs SET state = %s, failure_source = %s, failure_reason = %s, "
            "result_json = COALESCE(%s, result_json), "
            f"episodes_done = COALESCE(%s, episodes_done), updated = {_NOW}, lease_until = 0 "
            f"WHERE job_id = %s AND {cond}",
            (
                state.value,
                failure_source.value,
                failure_reason,
                result_json,
                episodes_done,
                job_id,
                *cond_args,
            ),
        )

    def requeue(self, job_id: str, reason: str) -> bool:
        return self._unclaim(job_id, reason, "attempts")

    def release(self, job_id: str) -> bool:
        return self._unclaim(job_id, None, "GREATEST(attempts - 1, 0)")

    def _unclaim(self, job_id: str, reason: str | None, attempts: str) -> bool:
        return self._update(
            "UPDATE jobs SET state = %s, owner = '', lease_until = 0, episodes_done = 0, "
            f"failure_reason = COALESCE(%s, failure_reason), attempts = {attempts}, "
            f"updated = {_NOW} WHERE job_id = %s AND state = %s AND owner = %s",
            (_QUEUED, reason, job_id, _RUNNING, self.owner),
        )

    def requeue_expired(
        self,
        *,
        run_id: str | None = None,
        fail_tokens: Collection[str] = (),
        fail_reason: str = "",
    ) -> ExpiredLeases:
        scope, args = ("", ()) if run_id is None else (" AND run_id = %s", (run_id,))

        def reap(cur: Cursor) -> ExpiredLeases:
            cur.execute(
                f"SELECT job_id, client_token FROM jobs WHERE state = %s AND lease_until < {_NOW}"
                f"{scope} ORDER BY seq FOR UPDATE SKIP LOCKED",
                (_RUNNING, *args),
            )
            rows = cur.fetchall()
            failed = [str(job) for job, token in rows if token in fail_tokens]
            requeued = [str(job) for job, token in rows if token not in fail_tokens]
            if failed:
                cur.execute(
                    "UPDATE jobs SET state = %s, failure_source = %s, failure_reason = %s, "
                    f"lease_until = 0, updated = {_NOW} WHERE job_id = ANY(%s)",
                    (
                        JobState.FAILED.value,
                        FailureSource.INFRASTRUCTURE.value,
                        fail_reason,
                        failed,
                    ),
                )
            if requeued:
                cur.execute(
                    "UPDATE jobs SET state = %s, owner = '', lease_until = 0, episodes_done = 0, "
                    f"updated = {_NOW}, failure_reason = %s WHERE job_id = ANY(%s)",
                    (_QUEUED, REQUEUED_REASON, requeued),
                )
            return ExpiredLeases(requeued, failed)

        return self._run(reap)

    def cancel_run(self, run_id: str, reason: str) -> list[str]:
        def cancel(cur: Cursor) -> list[str]:
            cur.execute(
                "SELECT job_id FROM jobs WHERE run_id = %s AND state IN (%s, %s) "
                "ORDER BY seq FOR UPDATE",
                (run_id, _QUEUED, _RUNNING),
            )
            ids = [str(r[0]) for r in cur.fetchall()]
            if ids:
                cur.execute(
                    "UPDATE jobs SET state = %s, failure_source = %s, failure_reason = %s, "
                    f"lease_until = 0, updated = {_NOW} WHERE job_id = ANY(%s)",
                    (JobState.CANCELLED.value, FailureSource.NONE.value, reason, ids),
                )
            return ids

        return self._run(cancel)

    def append_event(
        self,
        run_id: str,
        make: EventMaker,
        *,
        held_job: str | None = None,
        preamble: Sequence[EventMaker] | None = None,
    ) -> bool:
        def append(cur: Cursor) -> bool:
            if held_job is not None:
                cur.execute(
                    "SELECT 1 FROM jobs WHERE job_id = %s AND state = %s AND owner = %s FOR SHARE",
                    (held_job, _RUNNING, self.owner),
                )
                if cur.fetchone() is None:
                    return False
            cur.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_EVENT_LOCK_NS, run_id))
            cur.execute(
                "SELECT COALESCE(MAX(eval_seq) + 1, 0) FROM events WHERE run_id = %s", (run_id,)
            )
            seq = int(_scalar(cur))
            # under the run's lock: "no event yet" holds until this transaction commits
            makers = [*(preamble or ()), make] if seq == 0 else [make]
            for maker in makers:
                cur.execute(
                    "INSERT INTO events (run_id, eval_seq, event_json) VALUES (%s, %s, %s)",
                    (run_id, seq, maker(seq)),
                )
                seq += 1
            return True

        return self._run(append)

    # ------------------------------------------------------------------ runs --

    def add_run(self, run: RunRecord) -> bool:
        check_token_sha256(run.token_sha256)
        return self._update(
            f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) "
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

    def _run_where(self, where: str, args: tuple[Any, ...]) -> RunRecord | None:
        def read(cur: Cursor) -> RunRecord | None:
            cur.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE {where}", args)
            row = cur.fetchone()
            return None if row is None else run_from_row(row)

        return self._run(read, tx=False)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._run_where("run_id = %s", (run_id,))

    def open_run_by_token(self, token_sha256: str) -> RunRecord | None:
        return self._run_where("token_sha256 = %s AND closed_unix = 0", (token_sha256,))

    def revoke_run(self, run_id: str) -> RunRecord | None:
        def revoke(cur: Cursor) -> RunRecord | None:
            cur.execute(
                f"UPDATE runs SET closed_unix = {_NOW} WHERE run_id = %s AND closed_unix = 0",
                (run_id,),
            )
            cur.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = %s", (run_id,))
            row = cur.fetchone()
            return None if row is None else run_from_row(row)

        return self._run(revoke)

    # -------------------------------------------------------- practice steps --

    def practice_steps(self, run_id: str) -> int:
        def read(cur: Cursor) -> int:
            cur.execute("SELECT agent_steps FROM practice_steps WHERE run_id = %s", (run_id,))
            row = cur.fetchone()
            return 0 if row is None else int(row[0])

        return self._run(read, tx=False)

    def charge_practice_steps(self, run_id: str, n: int, *, limit: int | None) -> tuple[bool, int]:
        if n < 0:
            raise ValueError(f"cannot charge a negative number of practice steps ({n})")
        if limit is not None and n > limit:  # past it whatever the count: nothing to write
            return False, self.practice_steps(run_id)
        cond, cond_args = (
            ("", ()) if limit is None else (" WHERE p.agent_steps + %s <= %s", (n, limit))
        )

        def charge(cur: Cursor) -> int | None:
            # one statement (autocommitted): the row lock of ON CONFLICT serializes
            # replicas charging the run, and the WHERE is re-checked on the newest count
            cur.execute(
                "INSERT INTO practice_steps AS p (run_id, agent_steps) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET agent_steps = p.agent_steps + %s"
                f"{cond} RETURNING agent_steps",
                (run_id, n, n, *cond_args),
            )
            row = cur.fetchone()
            return None if row is None else int(row[0])

        used = self._run(charge, tx=False)
        if used is None:  # refused: the count that refused it (or a later one)
            return False, self.practice_steps(run_id)
        return True, used

    def import_practice_steps(self, counts: Mapping[str, int]) -> None:
        rows = [(run_id, check_step_count(run_id, n)) for run_id, n in counts.items()]

        def merge(cur: Cursor) -> None:
            cur.executemany(
                "INSERT INTO practice_steps AS p (run_id, agent_steps) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET "
                "agent_steps = GREATEST(p.agent_steps, EXCLUDED.agent_steps)",
                rows,
            )

        self._run(merge)


def _qualified(table: str) -> str:
    return ", ".join(f"{table}.{c.strip()}" for c in JOB_COLUMNS.split(","))


def _scalar(cur: Cursor) -> Any:
    row = cur.fetchone()
    assert row is not None
    return row[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
