"""Appending events to a run's trajectory, atomically and durably, from any process.

Several processes may append to one file (the harness, an agent-event relay,
tests), so the chain position is read and extended under one exclusive
``fcntl.flock`` on the file itself:

1. open with ``O_APPEND`` and take the lock (released when the descriptor closes);
2. read only the tail of the file to find the last line, and refuse to go on
   if it is torn (no final newline) or is not a valid event of this run:
   a trajectory is evidence, so the writer never repairs or skips it;
3. build the event with ``seq`` = last seq + 1 and ``prev_hash`` = last hash;
4. write the whole line with one ``os.write`` (a failed or short write is cut
   back off, so the file never keeps half a line we wrote);
5. ``os.fsync`` the file (and its directory after the first line).

``flock`` is advisory and local: it serializes the cooperating writers on one
machine (every writer here uses it), not a hostile process, and not writers on
different NFS clients. Hostile edits are the verifier's business.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Literal

from ale_robotics.trajectory.errors import (
    CorruptTrajectoryError,
    EventFormatError,
    InvalidEventError,
    TornTrajectoryError,
    TrajectoryError,
)
from ale_robotics.trajectory.events import (
    GENESIS_HASH,
    RUN_ID_PATTERN,
    Event,
    build_event,
    format_time,
)
from ale_robotics.trajectory.signing import SignedEvaluatorEvent

__all__ = ["TrajectoryWriter"]

_TAIL_CHUNK: Final = 64 * 1024
_FILE_MODE: Final = 0o644


class TrajectoryWriter:
    """Appends events of one run to ``path`` (created with its directory if absent).

    The writer keeps no state between appends: each one re-reads the tail under
    the lock, so any number of writers, in any processes, can share the file.
    """

    def __init__(self, path: Path | str, run_id: str) -> None:
        if not re.match(RUN_ID_PATTERN, run_id):
            raise InvalidEventError(f"run_id {run_id!r} does not match {RUN_ID_PATTERN}")
        self.path = Path(path)
        self.run_id = run_id

    def append(
        self,
        level: Literal["agent", "harness"],
        kind: str,
        payload: Mapping[str, object] | None = None,
    ) -> Event:
        """Append an unsigned ``agent`` or ``harness`` event stamped with the current time.

        ``trusted_evaluator`` events cannot be made here: they must come signed
        from the evaluator, through :meth:`append_signed`.
        """
        if level not in ("agent", "harness"):
            raise InvalidEventError(
                f"append() writes 'agent' or 'harness' events, not {level!r}; "
                "trusted_evaluator events come signed from the evaluator: use append_signed()"
            )
        body: Mapping[str, object] = {} if payload is None else payload

        def make(seq: int, prev_hash: str) -> Event:
            return build_event(
                seq=seq,
                prev_hash=prev_hash,
                run_id=self.run_id,
                level=level,
                kind=kind,
                payload=body,
                time=format_time(),
            )

        return self._append(make)

    def append_signed(self, signed: SignedEvaluatorEvent) -> Event:
        """Append an evaluator event exactly as signed (its time, payload and signature).

        Refuses an event signed for another run. The signature itself is not
        checked here (the writer has no key); ``trajectory verify`` checks it.
        """
        if signed.run_id != self.run_id:
            raise InvalidEventError(
                f"signed event {signed.kind!r} (eval_seq {signed.eval_seq}) is for run "
                f"{signed.run_id!r}, not for this trajectory's run {self.run_id!r}"
            )

        def make(seq: int, prev_hash: str) -> Event:
            return build_event(
                seq=seq,
                prev_hash=prev_hash,
                run_id=signed.run_id,
                level="trusted_evaluator",
                kind=signed.kind,
                payload=signed.payload,
                time=signed.time,
                sig=signed.sig,
            )

        return self._append(make)

    def _append(self, make: Callable[[int, str], Event]) -> Event:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, _FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            last = self._last_event(fd, size)
            event = make(0, GENESIS_HASH) if last is None else make(last.seq + 1, last.hash)
            line = event.to_line()
            try:
                written = os.write(fd, line)
            except OSError as exc:
                note = _cut_back(fd, size)
                raise TrajectoryError(f"cannot append to {self.path}: {exc}{note}") from exc
            if written != len(line):
                note = _cut_back(fd, size)
                raise TrajectoryError(
                    f"short write to {self.path} ({written} of {len(line)} bytes, disk full?)"
                    + note
                )
            os.fsync(fd)
            if size == 0:
                _fsync_dir(self.path.parent)
            return event
        finally:
            os.close(fd)  # also releases the lock

    def _last_event(self, fd: int, size: int) -> Event | None:
        """The file's last event, read from its tail only; None for an empty file."""
        if size == 0:
            return None
        line = _read_last_line(fd, size)
        if line is None:
            raise TornTrajectoryError(
                f"{self.path} ends with a torn line (the last write did not complete: "
                "no final newline). Refusing to append after it; the file is kept as "
                "evidence and `ale-robotics trajectory verify` reports it"
            )
        try:
            last = Event.from_line(line)
        except EventFormatError as exc:
            raise CorruptTrajectoryError(
                f"the last line of {self.path} is not a valid event ({exc}); refusing to append"
            ) from exc
        if last.compute_hash() != last.hash:
            raise CorruptTrajectoryError(
                f"the last event of {self.path} (seq {last.seq}) does not match its hash; "
                "it was edited. Refusing to extend a broken chain"
            )
        if last.run_id != self.run_id:
            raise CorruptTrajectoryError(
                f"{self.path} is the trajectory of run {last.run_id!r}, not {self.run_id!r}"
            )
        return last


def _read_last_line(fd: int, size: int) -> bytes | None:
    """The last line without its newline, or None when the file does not end with one.

    Reads backwards in chunks until the newline before the last line (or the
    start of the file), so appending costs O(last line), not O(file).
    """
    if os.pread(fd, 1, size - 1) != b"\n":
        return None
    tail = b""
    pos = size - 1  # the final newline; the last line is everything before it
    while pos > 0:
        start = max(0, pos - _TAIL_CHUNK)
        chunk = os.pread(fd, pos - start, start)
        cut = chunk.rfind(b"\n")
        if cut != -1:
            return chunk[cut + 1 :] + tail
        tail = chunk + tail
        pos = start
    return tail


def _cut_back(fd: int, size: int) -> str:
    """Remove what a failed write may have left past ``size`` (we still hold the lock).

    Returns a note for the error message rather than raising: the write error
    is the one to report, and a torn tail left behind is flagged by verify.
    """
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        return f"; removing the partial line also failed ({exc}), so the file may end torn"
    return "; the partial line was removed and nothing was appended"


def _fsync_dir(directory: Path) -> None:
    """Make the new file's directory entry durable, not just its contents."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
