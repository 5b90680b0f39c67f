"""The run index: one :class:`RunSummary` per run under a runs root, kept in SQLite.

``<root>/index.sqlite3`` caches the summaries so that listing hundreds of runs does
not parse hundreds of ``result.json`` files (each holds every episode of its
evaluation), nor verify hundreds of trajectories: each row keeps the run's summary
and its verdict (:mod:`.verify`: does ``result.json`` agree with the signed events?).
The run directories stay the truth: the index is refreshed from them on every read,
so it can be deleted at any time, and it is never stale:

- a run whose ``result.json`` or ``trajectory.jsonl`` differs from its row's stamp
  (each file's size, modification time and inode change time: an edit changes the
  last even when the first two are put back) is read and verified again (a run
  rewritten, an interrupted run redone, a trajectory cut);
- a run directory added gets a row, one removed loses its row;
- an index of another schema (:data:`INDEX_SCHEMA_VERSION`, summaries of another
  :data:`~.summary.SUMMARY_SCHEMA_VERSION`, verdicts of another
  :data:`~.verify.VERIFY_VERSION`), or a file that is not SQLite, is rebuilt.

The index is a cache, not a witness: whoever can write the runs root can write it,
so a row is only taken as it is when its MAC checks (:mod:`.index_key`: HMAC-SHA256
with the user's key, kept outside the runs root). The MAC covers everything the row
asserts: the run's path, both files' stamps, a SHA-256 of both files' content taken
when the row was written, the summary and the verdict. A row whose MAC fails (the index
edited: a score, a label, a verdict rewritten) is read and verified again from the
run's files, named in :attr:`Refresh.untrusted` and in :attr:`RunIndex.warnings`.
Rows are kept per key, so users sharing a runs root each keep their own and never
take each other's. Where the key can be neither read nor created, no row of the index
file is trusted: the index lives in memory and every run is verified from its files
(slower, and a warning says so).

The evaluator keys a reader trusts (``public_keys``) are applied when rows are read
(:func:`~.verify.pin`), so one index serves readers with different keys.

Run directories are found under the root at any depth up to :data:`MAX_DEPTH`
(``runs/<run_id>/`` from ``ale-robotics run``, deeper layouts from eval sets); a
directory holding ``result.json`` is a run, one holding only ``trajectory.jsonl`` is
a run still going (not listed yet) and neither is looked into further.

Several processes may read and refresh one index at once (SQLite's locking); where
the root is read-only the index lives in memory for the process and
:attr:`RunIndex.warnings` says so.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pydantic

from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.runs.index_key import IndexKey, IndexKeyError, ephemeral_key, load_index_key
from ale_robotics.runs.index_scan import MAX_DEPTH, content_digest, scan
from ale_robotics.runs.leaderboard import LeaderRow, leaderboard
from ale_robotics.runs.summary import (
    COMPUTED_FIELDS,
    SUMMARY_SCHEMA_VERSION,
    RunSummary,
    load_summary,
)
from ale_robotics.runs.verify import VERIFY_VERSION, pin

__all__ = [
    "INDEX_FILE",
    "INDEX_SCHEMA_VERSION",
    "MAX_DEPTH",
    "IndexProblem",
    "LeaderRow",
    "Refresh",
    "RunIndex",
    "RunSummary",
    "leaderboard",
]

INDEX_FILE = "index.sqlite3"
INDEX_SCHEMA_VERSION = 3
"""The tables' layout; with :data:`SUMMARY_SCHEMA_VERSION` what the index was built for."""

_VERSION = (INDEX_SCHEMA_VERSION * 1000 + SUMMARY_SCHEMA_VERSION) * 1000 + VERIFY_VERSION
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    key_id TEXT NOT NULL,
    path TEXT NOT NULL,
    stamp TEXT NOT NULL,
    digest TEXT NOT NULL,
    run_id TEXT,
    task_id TEXT,
    started_at TEXT,
    summary TEXT,
    problem TEXT,
    mac TEXT NOT NULL,
    PRIMARY KEY (key_id, path)
);
"""
_COLUMNS = "path, stamp, digest, run_id, task_id, started_at, summary, problem"
_SHOWN = 5
"""Run dirs named in a warning about rows that did not check (then 'and N more')."""


@dataclass(frozen=True)
class IndexProblem:
    """A ``result.json`` that could not be summarized (unreadable, not a run report)."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Refresh:
    """What the last refresh changed (for a test, or a command's ``--verbose``)."""

    rebuilt: bool = False
    """The index was (re)created: missing, of another schema, or not SQLite."""
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    untrusted: list[str] = field(default_factory=list)
    """Rows whose MAC did not check (the index edited): read and verified again."""


@dataclass(frozen=True)
class _Row:
    """One row of the index, as signed (everything the MAC covers but the key's id)."""

    path: str
    stamp: str
    digest: str
    run_id: str | None
    task_id: str | None
    started_at: str | None
    summary: str | None
    problem: str | None

    def message(self, key_id: str) -> bytes:
        """What the MAC is taken over: the index's version, the key's id and every column
        (so a row cannot be moved to another run, another stamp or another key's rows),
        each one length-prefixed (no two rows share a message; cheaper than JSON)."""
        fields: list[str | None] = [str(_VERSION), key_id, self.path, self.stamp, self.digest]
        fields += [self.run_id, self.task_id, self.started_at, self.summary, self.problem]
        parts = []
        for text in fields:
            if text is None:
                parts.append(b"-;")
            else:
                data = text.encode()
                parts += [b"%d;" % len(data), data]
        return b"".join(parts)


class RunIndex:
    """The runs under ``root``, summarized, and the index file that keeps them.

    ``public_keys``: the evaluator keys (hex) the reader trusts; a run whose signed events
    verify with another key is unverified. Empty: each trajectory's own key is taken.

    Raises :class:`~ale_robotics.errors.NotFoundError` when ``root`` does not exist and
    :class:`~ale_robotics.errors.InvalidArgumentError` when it is not a directory.
    """

    def __init__(self, root: Path, public_keys: Collection[str] = ()) -> None:
        if not root.exists():
            raise NotFoundError(
                f"no runs directory {str(root)!r}: pass the RUNS_ROOT that 'ale-robotics run' "
                "wrote its runs to (by default ./runs, in the directory it was started from)"
            )
        if not root.is_dir():
            raise InvalidArgumentError(
                f"{str(root)!r} is not a directory: RUNS_ROOT is the directory holding the "
                "run directories (by default ./runs)"
            )
        self.root = root.absolute()
        self.path = self.root / INDEX_FILE
        self.public_keys = frozenset(public_keys)
        self.warnings: list[str] = []
        """What did not go as it should, but did not stop the index (a read-only root)."""
        self.last_refresh = Refresh()
        self._con: sqlite3.Connection | None = None
        self._in_memory = False
        self._unfinished: list[Path] = []
        self._rows: dict[str, _Row] | None = None
        """The rows of the last refresh: each one's MAC checked, or written by it."""
        self._checked: dict[_Row, str] = {}
        """Rows this index checked or wrote, with their MACs: one read again unchanged (the
        next refresh of this process) is not checked again."""
        try:
            self._key: IndexKey = load_index_key()
        except IndexKeyError as exc:
            # No key: no row of the file can be told from a forged one, so none is read.
            self._key = ephemeral_key()
            self._in_memory = True
            self.warnings.append(
                f"the run index's key is unusable: {exc}; no row of {self.path} is trusted, "
                "so every run is verified from its files for this command (slower)"
            )

    # ---------------------------------------------------------------- public --

    def runs(self, task_id: str | None = None) -> list[RunSummary]:
        """Every run under the root (of ``task_id`` only, when given), oldest first.

        The index is refreshed first, so a run finished a moment ago is listed.
        """
        self.refresh()
        assert self._rows is not None
        rows = sorted(
            (r.started_at or "", r.run_id or "", r.path, r.summary)
            for r in self._rows.values()
            if r.summary is not None and (task_id is None or r.task_id == task_id)
        )
        return [self._summary(path, text) for _, _, path, text in rows]

    def problems(self) -> list[IndexProblem]:
        """The ``result.json`` files under the root that are not run reports, and why
        (as of the last refresh; refreshed first if there was none)."""
        if self._rows is None:
            self.refresh()
        assert self._rows is not None
        rows = sorted((r.path, r.problem) for r in self._rows.values() if r.summary is None)
        return [IndexProblem(self.root / p / "result.json", str(why)) for p, why in rows]

    def find(self, ref: str) -> RunSummary:
        """The run ``ref`` names: its run id, a prefix of exactly one run id, or its
        directory (relative to the root). Raises
        :class:`~ale_robotics.errors.NotFoundError` for none, and
        :class:`~ale_robotics.errors.InvalidArgumentError` for several."""
        runs = self.runs()
        by_id = [s for s in runs if s.run_id == ref]
        by_dir = [s for s in runs if s.run_dir.relative_to(self.root).as_posix() == ref.strip("/")]
        for exact in (by_id, by_dir):
            if len(exact) == 1:
                return exact[0]
            if len(exact) > 1:
                raise _ambiguous(ref, exact, self.root)
        prefixed = [s for s in runs if s.run_id.startswith(ref)]
        if len(prefixed) == 1:
            return prefixed[0]
        if prefixed:
            raise _ambiguous(ref, prefixed, self.root)
        raise NotFoundError(
            f"no run {ref!r} under {self.root}: 'ale-robotics runs list {self.root}' shows "
            "the run ids (or pass the run's directory)"
        )

    def leaderboard(self, task_id: str | None = None) -> list[LeaderRow]:
        """:func:`~.leaderboard.leaderboard` of the runs under the root."""
        return leaderboard(self.runs(task_id), task_id)

    def unfinished(self) -> list[Path]:
        """The run directories with a trajectory but no ``result.json``, as of the last
        refresh: runs still going, or lost (:mod:`.unfinished` tells which)."""
        return list(self._unfinished)

    def refresh(self) -> Refresh:
        """Bring the index in line with the run directories; what changed."""
        self._unfinished = []
        scanned = scan(self.root, self._unfinished)
        try:
            changes = self._apply(scanned)
        except sqlite3.OperationalError as exc:
            if self._in_memory:
                raise
            self._use_memory(exc)
            changes = self._apply(scanned)
        self.last_refresh = changes
        if changes.untrusted:
            self.warnings.append(_untrusted_warning(self.path, changes.untrusted))
        return changes

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --------------------------------------------------------------- private --

    def _summary(self, path: str, text: str) -> RunSummary:
        summary = RunSummary.model_validate_json(text)
        update: dict[str, object] = {"run_dir": self.root / path}
        if summary.verification is not None:
            update["verification"] = pin(summary.verification, self.public_keys)
        return summary.model_copy(update=update)

    def _apply(self, scanned: dict[str, str]) -> Refresh:
        rebuilt = self._ensure_schema(self._connection())
        con = self._connection()  # a new one when the file was not SQLite
        key_id = self._key.key_id
        with _immediate(con):
            rows: dict[str, _Row] = {}
            untrusted: list[str] = []
            query = f"SELECT {_COLUMNS}, mac FROM runs WHERE key_id = ?"
            checked = self._checked
            for *columns, mac in con.execute(query, (key_id,)):
                row = _Row(*columns)
                if checked.get(row) == mac or self._key.checks(row.message(key_id), mac):
                    rows[row.path] = row
                    checked[row] = mac
                else:
                    untrusted.append(row.path)
            everyone = {p for (p,) in con.execute("SELECT DISTINCT path FROM runs")}
            added = sorted(p for p in scanned if p not in rows and p not in untrusted)
            updated = sorted(p for p in scanned if p in rows and rows[p].stamp != scanned[p])
            untrusted = sorted(p for p in untrusted if p in scanned)
            removed = sorted(p for p in everyone if p not in scanned)
            for path in added + updated + untrusted:
                rows[path] = self._store(con, path, scanned[path])
            # every key's rows of a run dir gone (other users' rows are rebuilt by them)
            con.executemany("DELETE FROM runs WHERE path = ?", [(p,) for p in removed])
            for path in removed:
                rows.pop(path, None)
        self._rows = rows
        return Refresh(
            rebuilt=rebuilt, added=added, updated=updated, removed=removed, untrusted=untrusted
        )

    def _store(self, con: sqlite3.Connection, path: str, stamp: str) -> _Row:
        run_dir = self.root / path
        digest = content_digest(run_dir)
        summary: RunSummary | None = None
        problem: str | None = None
        try:
            summary = load_summary(run_dir)
        except OSError as exc:
            problem = f"cannot be read: {exc.strerror or exc}"
        except (ValueError, pydantic.ValidationError) as exc:  # JSONDecodeError is one
            problem = f"not a run report: {_first_line(exc)}"
        row = _Row(
            path=path,
            stamp=stamp,
            digest=digest,
            run_id=summary.run_id if summary else None,
            task_id=summary.task_id if summary else None,
            started_at=summary.started_at.isoformat() if summary else None,
            summary=summary.model_dump_json(exclude=set(COMPUTED_FIELDS)) if summary else None,
            problem=problem,
        )
        key_id = self._key.key_id
        mac = self._key.mac(row.message(key_id))
        self._checked[row] = mac
        con.execute(
            f"INSERT OR REPLACE INTO runs (key_id, {_COLUMNS}, mac) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key_id,
                row.path,
                row.stamp,
                row.digest,
                row.run_id,
                row.task_id,
                row.started_at,
                row.summary,
                row.problem,
                mac,
            ),
        )
        return row

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            self._con = self._open()
        return self._con

    def _open(self) -> sqlite3.Connection:
        if self._in_memory:  # no key: the file is not read (its rows cannot be checked)
            return sqlite3.connect(":memory:", isolation_level=None)
        try:
            return sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.OperationalError as exc:  # cannot create it here (a read-only root)
            self._in_memory = True
            self.warnings.append(_memory_warning(self.path, exc))
            return sqlite3.connect(":memory:", isolation_level=None)

    def _ensure_schema(self, con: sqlite3.Connection) -> bool:
        """Create the tables, or recreate them for another schema; True when (re)built."""
        try:
            version = _version(con)
        except sqlite3.OperationalError:  # locked past the timeout, unreadable: not ours to fix
            raise
        except sqlite3.DatabaseError:  # not an SQLite file: start again
            con.close()
            self._con = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            con = self._connection()
            version = _version(con)
        if version == _VERSION:
            return False
        with _immediate(con):
            if _version(con) == _VERSION:  # another process rebuilt it meanwhile
                return False
            con.execute("DROP TABLE IF EXISTS runs")
            con.execute("DROP TABLE IF EXISTS schema_version")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            con.execute("INSERT INTO schema_version (version) VALUES (?)", (_VERSION,))
        return True

    def _use_memory(self, exc: sqlite3.OperationalError) -> None:
        self.close()
        self._in_memory = True
        self.warnings.append(_memory_warning(self.path, exc))
        self._con = sqlite3.connect(":memory:", isolation_level=None)


def _version(con: sqlite3.Connection) -> int | None:
    has = con.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if has is None:
        return None
    row = con.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row is not None else None


@contextlib.contextmanager
def _immediate(con: sqlite3.Connection) -> Iterator[None]:
    """A write transaction taken at once (two refreshes never interleave)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _memory_warning(path: Path, exc: Exception) -> str:
    return (
        f"cannot write the run index {path} ({exc}): it is kept in memory for this "
        "command, so every result.json is read again next time"
    )


def _untrusted_warning(path: Path, runs: list[str]) -> str:
    shown = ", ".join(runs[:_SHOWN])
    more = f" and {len(runs) - _SHOWN} more" if len(runs) > _SHOWN else ""
    return (
        f"{path} was edited outside ale-robotics: {len(runs)} row(s) did not match their "
        f"signature, so these runs were verified again from their files: {shown}{more}"
    )


def _first_line(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        return f"{where}: {err['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _ambiguous(ref: str, runs: list[RunSummary], root: Path) -> InvalidArgumentError:
    shown = ", ".join(sorted(s.run_dir.relative_to(root).as_posix() for s in runs)[:5])
    more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
    return InvalidArgumentError(
        f"{ref!r} names {len(runs)} runs under {root} ({shown}{more}): give the whole run id "
        "or the run's directory"
    )
