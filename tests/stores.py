"""The job stores under test (``backend``): each contract test runs once per store kind.

:class:`Backend` is one store kind on a fresh file or database; a test opens
one store per simulated evaluator process on it (``backend.open(owner=...)``),
as those processes do, so the rules are checked across real connections. The
PostgreSQL cases run on the session's throwaway cluster (:mod:`pg`) and are
skipped, saying why, where PostgreSQL is not installed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg import PgCluster

from ale_robotics.evaluator.store import DEFAULT_LEASE_S, JobStore, open_store

__all__ = ["KINDS", "Backend", "backend"]

KINDS = ("sqlite", "postgresql")


class Backend:
    """One store kind on one fresh file or database."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind = kind
        self.url = url
        """What :func:`open_store` takes: the SQLite file's path, or a libpq URI."""
        self._opened: list[JobStore] = []

    def open(self, owner: str | None = None, lease_s: float = DEFAULT_LEASE_S) -> JobStore:
        """A store on it for one more evaluator process (closed after the test)."""
        store = open_store(self.url, owner=owner, lease_s=lease_s)
        self._opened.append(store)
        return store

    def set_schema_version(self, version: int) -> None:
        """Write ``version`` as a newer release would have (outside any store)."""
        self.sql(f"INSERT INTO schema_version (version, applied) VALUES ({int(version)}, 0)")

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        """Run one statement outside any store (committed); its rows."""
        if self.kind == "sqlite":
            con = sqlite3.connect(self.url)
            try:
                rows = con.execute(statement).fetchall()
                con.commit()
            finally:
                con.close()
            return rows
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(statement)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []

    def close_all(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        url = str(tmp_path / "jobs.sqlite3")
    else:
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        url = cluster.create_database()
    b = Backend(request.param, url)
    try:
        yield b
    finally:
        b.close_all()
