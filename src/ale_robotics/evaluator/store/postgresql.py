"""The PostgreSQL dialect: evaluator replicas on several hosts share one database.

The queries are :mod:`.sql`'s; this module says how PostgreSQL runs them when the
writers are processes on different machines.

Clock. Every time the store writes or compares (``created``, ``heartbeat``,
``lease_until``) is the database server's (``:now`` is ``statement_timestamp()``,
never the caller's ``time.time()``), so replicas whose clocks disagree still agree
on whose lease has run out.

Locking (all transactions READ COMMITTED): rows are taken ``FOR UPDATE SKIP
LOCKED``, ``FOR UPDATE`` or ``FOR SHARE`` as :mod:`.sql` says; a run's event numbers
under ``pg_advisory_xact_lock(namespace, hashtext(run_id))``, held until the commit
(runs whose hashes collide just wait for each other); schema changes under an
advisory lock of their own. Should PostgreSQL still report a deadlock or a
serialization failure, the transaction (rolled back, nothing written) is retried.

Connections. One psycopg connection per store (autocommit, each call one short
transaction or one statement), used under a lock. Why not a pool: psycopg_pool is a
separate package, and an evaluator's store calls are short and already serialized
per process; why not one connection per thread: the gRPC server runs many
short-lived worker threads, each would keep a server connection open (PostgreSQL's
``max_connections`` is shared by every replica), and none could be closed from
:meth:`PostgresDialect.close`. So one replica holds one connection. A connection
lost (server restart, network) makes that call raise :class:`.base.StoreUnavailable`
(never retried here: it may have committed) and the next call reconnects. A replica
stalled inside a transaction cannot hold others' locks for long: the session's
``idle_in_transaction_session_timeout`` ends it.

Give the evaluator a database (or a schema, ``?options=-csearch_path%3DNAME``)
of its own: the tables are ``jobs``, ``events``, ``runs``, ``practice_steps`` and
``schema_version``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator.store.base import DEFAULT_LEASE_S, StoreUnavailable, redacted
from ale_robotics.evaluator.store.dialect import Dialect, Tx
from ale_robotics.evaluator.store.sql import SqlJobStore

__all__ = ["PostgresDialect", "PostgresJobStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_NOW_SQL = "date_part('epoch', statement_timestamp())"
"""Now, in Unix seconds of the database server's clock (double precision)."""
_NOW = re.compile(r"(?<![:\w]):now\b")
_NAME = re.compile(r"(?<![:\w]):(\w+)")
_EVENT_LOCK_NS = 0x414C4545
"""First key of a run's event lock (two int4 keys: a key space apart from the one-bigint
key of :data:`_SCHEMA_LOCK`)."""
_SCHEMA_LOCK = 0x414C45_53434845
"""Advisory lock key (one bigint) of schema changes."""
_RETRIES = 5
"""Attempts at a transaction PostgreSQL aborted as a deadlock or serialization failure."""
_IDLE_IN_TX_MIN_S = 10.0


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """``:name`` as psycopg's ``%(name)s``, ``:now`` as the server's clock."""
    return _NAME.sub(r"%(\1)s", _NOW.sub(_NOW_SQL, sql.replace("%", "%%")))


class PostgresDialect(Dialect):
    """One connection (made on first use, remade after a loss) to the database at
    ``url``, a libpq connection URI; InvalidArgumentError for a malformed one."""

    identity = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    for_update = " FOR UPDATE"
    for_share = " FOR SHARE"

    def __init__(self, url: str) -> None:
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise InvalidArgumentError(
                f"job store {redacted(url)!r} is not a PostgreSQL connection URI: {exc}"
            ) from None
        self.url = url
        self.where = redacted(url)
        self._params = params
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._closed = False
        self._name = "ale-robotics evaluator"
        self._idle_ms = int(_IDLE_IN_TX_MIN_S * 1000)

    def open(self, owner: str, lease_s: float) -> None:
        self._name = f"ale-robotics evaluator {owner}"[:63]
        self._idle_ms = int(max(lease_s, _IDLE_IN_TX_MIN_S) * 1000)

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        extra: dict[str, Any] = {}
        if "connect_timeout" not in self._params:
            extra["connect_timeout"] = 10
        if "application_name" not in self._params:
            extra["application_name"] = self._name
        try:
            conn = psycopg.connect(self.url, autocommit=True, **extra)
            conn.execute(
                "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                (str(self._idle_ms),),
            )
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot connect to the job store {self.where}: {_first_line(exc)}"
            ) from exc
        return conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):  # already gone
                    self._conn.close()
                self._conn = None

    def translate(self, sql: str, params: dict[str, object]) -> tuple[str, Any]:
        return _pg_sql(sql), params

    def run(self, fn: Callable[[Tx], T], *, tx: bool = True, durable: bool = True) -> T:
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
                            return fn(Tx(cur, self))
                    with conn.transaction(), conn.cursor() as cur:
                        return fn(Tx(cur, self))
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
                        f"the job store {self.where} failed: {_first_line(exc)}"
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def lock_events(self, tx: Tx, run_id: str) -> None:
        tx.execute(
            "SELECT pg_advisory_xact_lock(:ns, hashtext(:run_id))", ns=_EVENT_LOCK_NS, run_id=run_id
        )

    def lock_schema(self, tx: Tx) -> None:
        tx.execute("SELECT pg_advisory_xact_lock(:key)", key=_SCHEMA_LOCK)


class PostgresJobStore(SqlJobStore):
    """The job store in the PostgreSQL database at ``url`` (a libpq connection URI).

    Creates or migrates the schema when it opens. Raises
    :class:`.base.StoreUnavailable` when the server cannot be reached (at open or
    on any later call) and InvalidArgumentError for a malformed URL.
    """

    def __init__(
        self, url: str, *, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        self.url = url
        super().__init__(PostgresDialect(url), owner=owner, lease_s=lease_s)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
