"""The SQLite dialect (WAL), the embedded default: one file in the state dir.

Several evaluator processes of one host share the file (every ``ale-robotics run``
embeds an evaluator on the same default state dir; a shared ``evaluator serve`` may
run beside them). Each write transaction is ``BEGIN IMMEDIATE``: the file's write
lock, taken up front, is the lock of every row the transaction reads and of a run's
event numbers, so the dialect's row-lock suffixes are empty. Times are this host's
clock (``:now`` is ``time.time()``). Needs SQLite 3.35 or newer (``RETURNING``).

Practice step charges (one per practice Step call) commit with
``synchronous=NORMAL``, every other write with ``FULL``: in WAL mode a NORMAL
commit is as atomic and as isolated (the budget check holds across processes
all the same) and survives the process being killed, but is flushed to disk with
the next FULL commit or checkpoint rather than at once, so a power loss may forget
the last moments of counting. An fsync on every Step of every practice session
would cost more than the Step.

A fault of the storage under the file (a full disk, an I/O error, a read-only or
corrupt file, a lock held past the busy timeout) leaves every call as
:class:`.base.StoreUnavailable` (UNAVAILABLE), as the PostgreSQL store's lost
connections do, never as a raw ``sqlite3`` error: the evaluator's callers then tell an
infrastructure failure from a bug (a malformed statement stays a ``sqlite3`` error, a
bug, INTERNAL). The translation is :meth:`SqliteDialect.run`'s, which every
statement runs under.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator.store.base import DEFAULT_LEASE_S, StoreUnavailable
from ale_robotics.evaluator.store.dialect import Dialect, Tx
from ale_robotics.evaluator.store.sql import SqlJobStore

__all__ = ["SqliteDialect", "SqliteJobStore", "damage", "storage_fault"]

T = TypeVar("T")

_MIN_VERSION = (3, 35, 0)
_NOW = re.compile(r"(?<![:\w]):now\b")

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


def damage(path: Path) -> str | None:
    """What is wrong with the SQLite file at ``path``, read only (SQLite's
    ``quick_check``), or None when it is sound or absent.

    For the checks before a run starts: a damaged store found then is the operator's
    to mend (one line, nothing made), where found later it would fail the run midway.
    """
    if not path.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            rows = db.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return str(exc)
        return None  # busy, locked, unreadable: not damage; the evaluator says what it is
    problems = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return "; ".join(problems[:3]) or None


class SqliteDialect(Dialect):
    """One connection to the file at ``path``, guarded by a lock."""

    identity = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @property
    def connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreUnavailable("the job store was never opened")
        return self._conn

    def open(self, owner: str, lease_s: float) -> None:
        if sqlite3.sqlite_version_info < _MIN_VERSION:
            raise FailedPreconditionError(
                f"the SQLite job store needs SQLite 3.35 or newer; this Python's sqlite3 "
                f"module has {sqlite3.sqlite_version}"
            )
        with self._faults():
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._wal()
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA busy_timeout=5000")

    def _wal(self) -> None:
        """Switch the file to WAL (a no-op once it is).

        SQLite answers "database is locked" at once, without waiting, to a process
        switching a fresh file while another opens it too (two runs starting on a
        new state dir): retried for up to 5 s, like any other busy lock.
        """
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self.connection.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()

    def translate(self, sql: str, params: dict[str, object]) -> tuple[str, Any]:
        if _NOW.search(sql):
            params = {**params, "now": time.time()}
        return sql, params

    def run(self, fn: Callable[[Tx], T], *, tx: bool = True, durable: bool = True) -> T:
        with self._lock, self._faults():
            db = self.connection
            if not durable:
                db.execute("PRAGMA synchronous=NORMAL")
            try:
                if not tx:
                    return fn(Tx(db.cursor(), self))
                db.execute("BEGIN IMMEDIATE")
                try:
                    out = fn(Tx(db.cursor(), self))
                    db.execute("COMMIT")
                    return out
                except BaseException:
                    # SQLite may have rolled back already (a full disk, an I/O error at
                    # COMMIT): the original error is the one to raise
                    if db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            db.execute("ROLLBACK")
                    raise
            finally:
                if not durable:
                    db.execute("PRAGMA synchronous=FULL")

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """Storage faults raised inside leave as :class:`.base.StoreUnavailable`."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not storage_fault(exc):
                raise
            raise StoreUnavailable(
                f"the job store {self.path} failed: {exc} (a fault of the evaluator's "
                "storage: free space on its disk or fix the file, then retry)",
                fault=f"the job store failed: {exc}",  # SQLite's words name no path
            ) from exc


class SqliteJobStore(SqlJobStore):
    """The job store in the SQLite file at ``path`` (created when missing).

    ``owner`` is the evaluator process this store acts for (default: a new
    :func:`.base.new_owner_id`) and ``lease_s`` how long its claims last unrenewed.
    Other processes open their own store on the same file.
    """

    def __init__(
        self, path: Path, *, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        self.path = path
        self.dialect: SqliteDialect = SqliteDialect(path)
        super().__init__(self.dialect, owner=owner, lease_s=lease_s)
