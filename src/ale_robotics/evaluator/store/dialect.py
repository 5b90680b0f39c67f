"""What differs between the SQL engines under :class:`.sql.SqlJobStore`: the dialect.

The store writes each query once, with named parameters (``:run_id``) and ``:now``
for the store's clock; a :class:`Dialect` runs it on its engine:

* connection and transactions: :meth:`Dialect.run` calls a function with a
  :class:`Tx` in one write transaction (or, ``tx=False``, for one autocommitted
  statement), under the store's lock, and translates the engine's faults to
  :class:`.base.StoreUnavailable` (every other error is a bug and stays as it is);
* placeholders and the clock (:meth:`Dialect.translate`): ``:name`` becomes the
  driver's own, and ``:now`` this host's time (SQLite) or the server's
  (PostgreSQL);
* locking: the row-lock suffixes of a SELECT (``FOR UPDATE SKIP LOCKED``, empty
  where the whole write transaction is the lock, as SQLite's ``BEGIN IMMEDIATE``
  is), a run's event lock and the schema lock;
* DDL: the ``jobs.seq`` column (an identity column), for :mod:`.migrations`.

The dialects are :class:`.sqlite.SqliteDialect` and :class:`.postgresql.PostgresDialect`.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

__all__ = ["Cursor", "Dialect", "Tx"]

T = TypeVar("T")

_LIST_PARAM = re.compile(r"(?<![:\w]):(\w+)\b")


class Cursor(Protocol):
    """The part of a DB-API cursor (sqlite3's, psycopg's) a :class:`Tx` uses."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: Any, params: Any, /) -> Any: ...

    def executemany(self, sql: Any, params: Any, /) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Tx:
    """Statements of one transaction (or one autocommitted statement) on a dialect's
    connection. SQL is written once for every engine: ``:name`` parameters, ``:now``
    the store's clock; a list parameter stands for the items of an ``IN (:ids)``."""

    def __init__(self, cursor: Cursor, dialect: Dialect) -> None:
        self._cur = cursor
        self._dialect = dialect

    def execute(self, sql: str, **params: object) -> Cursor:
        lists = {k: v for k, v in params.items() if isinstance(v, list | tuple)}
        if lists:
            sql, params = _expand(sql, params, lists)
        text, bound = self._dialect.translate(sql, params)
        self._cur.execute(text, bound)
        return self._cur

    def all(self, sql: str, **params: object) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.execute(sql, **params).fetchall()]

    def one(self, sql: str, **params: object) -> tuple[Any, ...] | None:
        """The first row (all are fetched: SQLite commits a RETURNING statement only then)."""
        rows = self.all(sql, **params)
        return rows[0] if rows else None

    def scalar(self, sql: str, **params: object) -> Any:
        """The first column of the one row ``sql`` returns."""
        row = self.one(sql, **params)
        assert row is not None, sql
        return row[0]

    def changed(self, sql: str, **params: object) -> int:
        """How many rows ``sql`` (an INSERT or UPDATE) changed."""
        return int(self.execute(sql, **params).rowcount)

    def many(self, sql: str, rows: Sequence[Mapping[str, object]]) -> None:
        """``sql`` once per row of parameters."""
        bound = [self._dialect.translate(sql, dict(r)) for r in rows]
        if bound:
            self._cur.executemany(bound[0][0], [params for _, params in bound])


def _expand(
    sql: str, params: dict[str, object], lists: dict[str, list[Any] | tuple[Any, ...]]
) -> tuple[str, dict[str, object]]:
    """``IN (:ids)`` with ``ids`` a list: one parameter per item (``IN (NULL)`` when empty)."""
    flat = {k: v for k, v in params.items() if k not in lists}

    def names(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in lists:
            return match.group(0)
        items = [f"{name}_{i}" for i in range(len(lists[name]))]
        flat.update(zip(items, lists[name], strict=True))
        return ", ".join(f":{item}" for item in items) or "NULL"

    return _LIST_PARAM.sub(names, sql), flat


class Dialect(abc.ABC):
    """One SQL engine's connection, transactions, placeholders, locks and faults."""

    where: str
    """The file or database, for logs and messages (no password)."""
    identity: ClassVar[str]
    """DDL of ``jobs.seq``: an integer primary key the engine numbers in insert order."""
    skip_locked: ClassVar[str] = ""
    """Suffix of a SELECT whose rows this transaction takes, skipping rows another holds."""
    for_update: ClassVar[str] = ""
    """Suffix of a SELECT whose rows this transaction will change (waits for others)."""
    for_share: ClassVar[str] = ""
    """Suffix of a SELECT whose rows must not change before this transaction commits."""

    @abc.abstractmethod
    def open(self, owner: str, lease_s: float) -> None:
        """Connect (or check that a connection can be made) for the store of ``owner``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection; the dialect is not used afterwards."""

    @abc.abstractmethod
    def translate(self, sql: str, params: dict[str, object]) -> tuple[str, Any]:
        """``sql`` and ``params`` as the driver takes them (``:now`` resolved)."""

    @abc.abstractmethod
    def run(self, fn: Callable[[Tx], T], *, tx: bool = True, durable: bool = True) -> T:
        """``fn`` in one write transaction, or with ``tx`` False for statements that
        are each atomic alone (reads, one conditional write), under the store's lock.

        ``durable`` False: the commit may reach the disk a little later (a practice
        step charge; an engine that has no such setting ignores it). The engine's
        faults (unreachable, full, corrupt) leave as :class:`.base.StoreUnavailable`.
        """

    def lock_events(self, tx: Tx, run_id: str) -> None:  # noqa: B027 (a no-op by default)
        """Hold the lock on ``run_id``'s event numbers until ``tx`` commits (a no-op
        where a write transaction already excludes every other writer)."""

    def lock_schema(self, tx: Tx) -> None:  # noqa: B027 (a no-op by default)
        """Hold the schema's lock until ``tx`` commits, so that stores opening at once
        apply each migration once (a no-op as :meth:`lock_events`)."""
