"""Read-only views of a job store: what an operator looks at, and what metrics count.

:class:`StoreView` runs plain SELECTs through a store's dialect: the jobs in the queue
and running (``ale-robotics evaluator queue``), the count of jobs in each state and the
store's clock (the metrics, :mod:`.server.metrics`). A running evaluator builds one on
its own store's dialect (:meth:`StoreView.of`); :func:`open_view` opens one on a store
by its path or URL without creating or migrating anything, which a
:class:`.sql.SqlJobStore` would do on opening: an operator's look at the queue must never
change it, nor make a file where a path was mistyped. SQLite is opened ``mode=ro``; on
PostgreSQL the view's connection only reads.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Self

from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError
from ale_robotics.evaluator.store.base import JobRecord, StoreUnavailable, redacted
from ale_robotics.evaluator.store.dialect import Dialect, Tx
from ale_robotics.evaluator.store.factory import StoreKind, parse_store_url
from ale_robotics.evaluator.store.sql import _SELECT_JOBS, SqlJobStore, _job
from ale_robotics.evaluator.store.sqlite import SqliteDialect
from ale_robotics.model.states import JobState

__all__ = ["StoreView", "open_view"]


class StoreView:
    """Reads of the jobs in a store, through ``dialect`` (whose connection it may share)."""

    def __init__(self, dialect: Dialect, *, owned: bool = False) -> None:
        self._dialect = dialect
        self._owned = owned
        """Whether :meth:`close` closes the dialect (one :func:`open_view` opened)."""

    @classmethod
    def of(cls, store: object) -> StoreView | None:
        """A view on a running evaluator's store (sharing its connection); None for a store
        that is not SQL (a test double)."""
        return cls(store.dialect) if isinstance(store, SqlJobStore) else None

    def counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state, 0 where none)."""
        rows = self._dialect.run(
            lambda tx: tx.all("SELECT state, COUNT(*) FROM jobs GROUP BY state"), tx=False
        )
        found = {JobState(str(state)): int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in JobState}

    def active(self) -> list[JobRecord]:
        """The QUEUED and RUNNING jobs, oldest first (the order they are claimed in)."""

        def read(tx: Tx) -> list[JobRecord]:
            rows = tx.all(f"{_SELECT_JOBS} WHERE state IN ('QUEUED', 'RUNNING') ORDER BY seq")
            return [job for job in map(_job, rows) if job is not None]

        return self._dialect.run(read, tx=False)

    def now(self) -> float:
        """The store's clock (Unix seconds), the one leases are measured on."""
        return float(self._dialect.run(lambda tx: tx.scalar("SELECT :now"), tx=False))

    def close(self) -> None:
        if self._owned:
            self._dialect.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _ReadOnlySqlite(SqliteDialect):
    """The SQLite dialect on a file opened ``mode=ro``: nothing is created or written."""

    def open(self, owner: str, lease_s: float) -> None:
        if not self.path.is_file():
            raise InvalidArgumentError(
                f"no job store at {self.path}: give the --state-dir or --store an evaluator uses"
            )
        try:
            self._conn = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?mode=ro",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
            )
            self._conn.execute("PRAGMA busy_timeout=5000")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot read the job store {self.path}: {exc}") from exc


def _has_jobs_table(dialect: Dialect, kind: StoreKind) -> bool:
    sql = (
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"
        if kind is StoreKind.SQLITE
        else "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'jobs' "
        "AND schemaname = ANY (current_schemas(false))"
    )
    return bool(dialect.run(lambda tx: tx.scalar(sql), tx=False))


def open_view(url_or_path: str | Path) -> StoreView:
    """A read-only view of the store ``url_or_path`` names (as ``--store`` takes it).

    InvalidArgumentError when there is no job store there (no file, or a database without
    the evaluator's tables); :class:`.base.StoreUnavailable` when it cannot be read.
    """
    where = parse_store_url(url_or_path)
    dialect: Dialect
    if where.kind is StoreKind.SQLITE:
        dialect = _ReadOnlySqlite(Path(where.target))
    else:
        try:
            from ale_robotics.evaluator.store.postgresql import PostgresDialect
        except ImportError as exc:
            raise FailedPreconditionError(
                f"reading a PostgreSQL job store needs psycopg 3 ({exc}): "
                "pip install 'psycopg[binary]'"
            ) from None
        dialect = PostgresDialect(where.target)
    dialect.open("queue view", 10.0)
    try:
        if not _has_jobs_table(dialect, where.kind):
            raise InvalidArgumentError(
                f"{redacted(where.target)} holds no job store (no jobs table): give the "
                "--state-dir or --store an evaluator uses"
            )
    except BaseException:
        dialect.close()
        raise
    return StoreView(dialect, owned=True)
