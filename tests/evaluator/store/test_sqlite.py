"""What only the SQLite store has: its file's journal mode and synchronous setting.

The rules every store keeps are in ``test_contract.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ale_robotics.evaluator.store import SqliteJobStore
from ale_robotics.evaluator.store.sqlite import damage


def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite3"
    store = SqliteJobStore(db)
    try:
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        con.close()
    finally:
        store.close()


def test_practice_charges_leave_the_connection_fully_synchronous(tmp_path: Path) -> None:
    """A charge commits with synchronous=NORMAL (one per practice Step); every other
    write keeps FULL, even after a refused charge."""
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    try:
        store.charge_practice_steps("r1", 1, limit=None)
        store.charge_practice_steps("r1", 5, limit=2)  # refused
        assert store.dialect.connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()


def test_damage_reads_a_store_without_writing_it(tmp_path: Path) -> None:
    """What the checks before a run say of a state dir's store: nothing when absent or sound,
    SQLite's words when its pages are junk or it is no database at all; the file untouched."""
    path = tmp_path / "jobs.sqlite3"
    assert damage(path) is None and not path.exists()
    SqliteJobStore(path).close()
    assert damage(path) is None
    with open(path, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff" * 8192)
    before = path.read_bytes()
    assert damage(path) == "database disk image is malformed"
    assert path.read_bytes() == before
    path.write_text("not a database")
    assert damage(path) == "file is not a database"
