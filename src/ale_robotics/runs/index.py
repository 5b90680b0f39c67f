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
import os
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pydantic

from ale_robotics.errors import InvalidArgumentError, NotFoundError
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
INDEX_SCHEMA_VERSION = 2
"""The tables' layout; with :data:`SUMMARY_SCHEMA_VERSION` what the index was built for."""
MAX_DEPTH = 6
"""How deep under the root run directories are looked for (an eval set's
``<set>/<task>/<label>/rep<k>/`` is 4)."""

_VERSION = (INDEX_SCHEMA_VERSION * 1000 + SUMMARY_SCHEMA_VERSION) * 1000 + VERIFY_VERSION
_SKIP_DIRS = frozenset({"scratch", "submission", "__pycache__"})
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    path TEXT PRIMARY KEY,
    stamp TEXT NOT NULL,
    run_id TEXT,
    task_id TEXT,
    started_at TEXT,
    summary TEXT,
    problem TEXT
);
"""


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


def _stamp(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _scan(root: Path, unfinished: list[Path] | None = None) -> dict[str, str]:
    """Run dir (relative to ``root``, POSIX) -> the stamp of its result.json and
    trajectory.jsonl (size, mtime and ctime of each; '-' for a missing trajectory).

    ``unfinished``: gets the run dirs with a trajectory but no result.json (running or lost).
    """
    found: dict[str, str] = {}

    def walk(path: Path, depth: int) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.name in _SKIP_DIRS:
                continue
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            sub = Path(entry.path)
            try:
                st = (sub / "result.json").stat()
            except OSError:
                if (sub / "trajectory.jsonl").exists():
                    if unfinished is not None:
                        unfinished.append(sub)
                elif depth < MAX_DEPTH:
                    walk(sub, depth + 1)
                continue
            try:
                traj = _stamp((sub / "trajectory.jsonl").stat())
            except OSError:
                traj = "-"
            found[sub.relative_to(root).as_posix()] = f"{_stamp(st)} {traj}"

    walk(root, 1)
    return found


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

    # ---------------------------------------------------------------- public --

    def runs(self, task_id: str | None = None) -> list[RunSummary]:
        """Every run under the root (of ``task_id`` only, when given), oldest first.

        The index is refreshed first, so a run finished a moment ago is listed.
        """
        self.refresh()
        con = self._connection()
        query = "SELECT path, summary FROM runs WHERE summary IS NOT NULL"
        args: tuple[str, ...] = ()
        if task_id is not None:
            query += " AND task_id = ?"
            args = (task_id,)
        rows = con.execute(query + " ORDER BY started_at, run_id, path", args).fetchall()
        return [self._summary(path, text) for path, text in rows]

    def problems(self) -> list[IndexProblem]:
        """The ``result.json`` files under the root that are not run reports, and why
        (as of the last refresh)."""
        rows = self._connection().execute(
            "SELECT path, problem FROM runs WHERE summary IS NULL ORDER BY path"
        )
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
        scanned = _scan(self.root, self._unfinished)
        try:
            changes = self._apply(scanned)
        except sqlite3.OperationalError as exc:
            if self._in_memory:
                raise
            self._use_memory(exc)
            changes = self._apply(scanned)
        self.last_refresh = changes
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
        with _immediate(con):
            known = dict(con.execute("SELECT path, stamp FROM runs").fetchall())
            added = sorted(p for p in scanned if p not in known)
            updated = sorted(p for p in scanned if p in known and known[p] != scanned[p])
            removed = sorted(p for p in known if p not in scanned)
            for path in added + updated:
                self._store(con, path, scanned[path])
            con.executemany("DELETE FROM runs WHERE path = ?", [(p,) for p in removed])
        return Refresh(rebuilt=rebuilt, added=added, updated=updated, removed=removed)

    def _store(self, con: sqlite3.Connection, path: str, stamp: str) -> None:
        run_dir = self.root / path
        summary: RunSummary | None = None
        problem: str | None = None
        try:
            summary = load_summary(run_dir)
        except OSError as exc:
            problem = f"cannot be read: {exc.strerror or exc}"
        except (ValueError, pydantic.ValidationError) as exc:  # JSONDecodeError is one
            problem = f"not a run report: {_first_line(exc)}"
        con.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                path,
                stamp,
                summary.run_id if summary else None,
                summary.task_id if summary else None,
                summary.started_at.isoformat() if summary else None,
                summary.model_dump_json(exclude=set(COMPUTED_FIELDS)) if summary else None,
                problem,
            ),
        )

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            self._con = self._open()
        return self._con

    def _open(self) -> sqlite3.Connection:
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
