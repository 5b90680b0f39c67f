"""Open a job store from what an operator writes: a path or a URL.

* a path, or ``sqlite:///ABSOLUTE/PATH``: the job store on SQLite
  (:class:`.sqlite.SqliteJobStore`), one file shared by the processes of one host;
* ``postgresql://...`` (or ``postgres://...``, any libpq connection URI): the job
  store on PostgreSQL (:class:`.postgresql.PostgresJobStore`), one database shared by
  evaluator replicas on several hosts.

The PostgreSQL module, and with it psycopg, is imported only when such a URL is
opened: an evaluator on SQLite never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError
from ale_robotics.evaluator.store.base import DEFAULT_LEASE_S, redacted
from ale_robotics.evaluator.store.ports import JobStore
from ale_robotics.evaluator.store.sqlite import SqliteJobStore

__all__ = ["StoreKind", "StoreLocation", "open_store", "parse_store_url"]

_POSTGRES_SCHEMES = ("postgresql", "postgres")
_INSTALL_HINT = "pip install 'psycopg[binary]'"


class StoreKind(StrEnum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class StoreLocation:
    """Which store a path or URL names: the kind, and the file or the connection URI."""

    kind: StoreKind
    target: str
    """The SQLite file's path, or the libpq connection URI (as given)."""


def parse_store_url(url_or_path: str | Path) -> StoreLocation:
    """Which store ``url_or_path`` names; InvalidArgumentError when none.

    Checks the form only (no file is opened, no server contacted), so a command
    can refuse a mistyped ``--store`` before it starts anything.
    """
    if isinstance(url_or_path, Path):
        return StoreLocation(StoreKind.SQLITE, str(url_or_path))
    text = url_or_path.strip()
    if not text:
        raise InvalidArgumentError("the job store is empty: give a path or a postgresql:// URL")
    if "://" not in text:
        return StoreLocation(StoreKind.SQLITE, text)
    scheme = text.split("://", 1)[0].lower()
    if scheme in _POSTGRES_SCHEMES:
        return StoreLocation(StoreKind.POSTGRESQL, text)
    if scheme == "sqlite":
        parts = urlsplit(text)
        if parts.netloc or not parts.path.startswith("/") or parts.query:
            raise InvalidArgumentError(
                f"job store {text!r}: a SQLite URL is sqlite:///ABSOLUTE/PATH (three "
                "slashes, then the file's absolute path), or give the path itself"
            )
        return StoreLocation(StoreKind.SQLITE, unquote(parts.path))
    raise InvalidArgumentError(
        f"job store {redacted(text)!r}: unknown scheme {scheme!r}; give a path, "
        "sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST/DATABASE"
    )


def open_store(
    url_or_path: str | Path, *, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S
) -> JobStore:
    """Open (create or migrate) the store ``url_or_path`` names, acting for ``owner``.

    Raises InvalidArgumentError for a form no store has, FailedPreconditionError
    when the PostgreSQL store's package is missing, and
    :class:`.base.StoreUnavailable` when its server cannot be reached.
    """
    where = parse_store_url(url_or_path)
    if where.kind is StoreKind.SQLITE:
        return SqliteJobStore(Path(where.target), owner=owner, lease_s=lease_s)
    try:
        # optional at import time: only an evaluator on PostgreSQL loads psycopg
        from ale_robotics.evaluator.store.postgresql import PostgresJobStore
    except ImportError as exc:
        if not (exc.name or "").startswith("psycopg"):
            raise
        raise FailedPreconditionError(
            f"the PostgreSQL job store needs psycopg 3, which is not installed ({exc}): "
            f"{_INSTALL_HINT}"
        ) from None
    return PostgresJobStore(where.target, owner=owner, lease_s=lease_s)
