"""Freeze a submission: copy the contract's files out of the shared volume, with their SHA-256.

The volume is written by an untrusted agent, so the copy is the only thing the
evaluator reads afterwards (later writes change nothing), and copying is where
the file-system rules are enforced: plain files only (no symlinks, no hard
links, no devices), no path outside the volume, size limits checked while
reading so a file growing under us cannot blow the limit.

The agent runs while we copy, so every check is made on what we actually open:
the directory is walked one component at a time with ``O_NOFOLLOW`` relative to
the previous directory's descriptor, and the file's type, link count and size
are re-checked with ``fstat`` on the open descriptor. Swapping a directory for a
symlink between a check and the open therefore cannot redirect the evaluator to
a file outside the volume (its secret, say).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import shutil
import stat
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.submission.mismatch import files_found
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.contract import SubmissionContract
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.evaluator.store import JobQueue, JobRecord

__all__ = [
    "CHECKPOINT_PREFIX",
    "MAX_PATH_BYTES",
    "RECLAIM_MIN_AGE_S",
    "STAGING_PREFIX",
    "reclaim_snapshots",
    "snapshot_files",
    "snapshot_submission",
    "staging_dir",
]

log = logging.getLogger(__name__)

STAGING_PREFIX = "staging-"
"""Names of the directories a snapshot is copied into before it becomes a job's."""
CHECKPOINT_PREFIX = "ckpt-"
"""Names of the snapshots of checkpoints (``ckpt-<checkpoint_id>``, :mod:`.runs.checkpoints`):
kept for good, since an audit re-evaluates every checkpoint of a run from its snapshot
(a job id never starts so: ``job-...``)."""
RECLAIM_MIN_AGE_S = 3600.0
"""How long a snapshot directory no job (yet) claims is left alone: far longer than
copying a submission can take (the contract caps its size), and than the moment
between renaming a snapshot into place and creating its job. Younger ones may
belong to an evaluator that is working on them right now."""

_CHUNK = 1 << 20
MAX_PATH_BYTES = 1024
"""Longest submission path accepted (UTF-8 bytes); longer ones are rejected, not echoed."""
_SHOWN_CHARS = 120


def shown_path(rel: str) -> str:
    """``rel`` as it may appear in a message: verbatim when short and printable, else a
    truncated ``repr`` (agent-chosen text must not make messages huge or unreadable)."""
    if rel.isprintable() and len(rel) <= _SHOWN_CHARS:
        return rel or "."
    text = repr(rel[:_SHOWN_CHARS])
    return text + "..." if len(rel) > _SHOWN_CHARS else text


def _open_dir(volume: Path, rel: str) -> int:
    """A descriptor of the submission directory, opened component by component.

    Refuses absolute paths, ``..``, NUL bytes, overlong paths and any symlink on
    the way; the caller closes the descriptor.
    """
    shown = shown_path(rel)
    if "\x00" in rel:
        raise SubmissionRejected(shown, "path", "submission path contains a NUL byte")
    size = len(rel.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise SubmissionRejected(
            shown, "path", f"submission path is {size} bytes long; the limit is {MAX_PATH_BYTES}"
        )
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        raise SubmissionRejected(
            shown, "path", "submission path must be relative to the submission volume"
        )
    if any(part == ".." for part in pure.parts):
        raise SubmissionRejected(shown, "path", "submission path must not contain '..'")
    fd = os.open(volume, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in pure.parts:
            if part == ".":
                continue
            try:
                st = os.lstat(part, dir_fd=fd)
            except OSError:
                raise SubmissionRejected(
                    shown, "path", "submission directory does not exist"
                ) from None
            if stat.S_ISLNK(st.st_mode):
                raise SubmissionRejected(shown, "no symlinks", f"{part!r} is a symbolic link")
            if not stat.S_ISDIR(st.st_mode):
                raise SubmissionRejected(shown, "path", f"{part!r} is not a directory")
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                rule = "no symlinks" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else "path"
                raise SubmissionRejected(
                    shown, rule, f"{part!r} changed while being opened or cannot be opened"
                ) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy_regular(dir_fd: int, name: str, dest: Path, max_bytes: int) -> str:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError as exc:
        raise SubmissionRejected(name, "readable", f"cannot stat: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise SubmissionRejected(name, "no symlinks", "is a symbolic link; write a plain file")
    if stat.S_ISDIR(st.st_mode):
        raise SubmissionRejected(name, "regular file", "is a directory, not a regular file")
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionRejected(name, "regular file", "is not a regular file")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        raise SubmissionRejected(name, "readable", f"cannot open: {exc.strerror}") from None
    digest = hashlib.sha256()
    total = 0
    try:
        fst = os.fstat(fd)
        if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(fst.st_mode):
            raise SubmissionRejected(name, "stable", "was replaced while being read")
        if fst.st_nlink > 1:
            raise SubmissionRejected(
                name, "no hard links", f"has {fst.st_nlink} hard links; write a fresh file"
            )
        if fst.st_size == 0:
            raise SubmissionRejected(name, "non-empty", "is empty")
        if fst.st_size > max_bytes:
            raise SubmissionRejected(
                name, "size limit", f"is {fst.st_size} bytes; the contract allows {max_bytes}"
            )
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while chunk := os.read(fd, _CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    raise SubmissionRejected(
                        name, "size limit", f"grew past {max_bytes} bytes while being read"
                    )
                digest.update(chunk)
                os.write(out, chunk)
            os.fsync(out)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    if total == 0:
        raise SubmissionRejected(name, "non-empty", "is empty")
    return digest.hexdigest()


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # present but odd: _copy_regular names the problem
    return True


_LISTED_NAMES = 1000
"""Most names read from a submission directory to say what it holds instead."""


def _names_in(dir_fd: int) -> list[str]:
    """The names in the submission directory (the first :data:`_LISTED_NAMES`), for a
    rejection that says what was found where a required file is missing."""
    names: list[str] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                names.append(entry.name)
                if len(names) >= _LISTED_NAMES:
                    break
    except OSError:
        pass
    return names


def snapshot_submission(
    volume: Path, rel_path: str, contract: SubmissionContract, dest: Path
) -> list[SnapshotFile]:
    """Copy the files the contract names from ``volume/rel_path`` into ``dest``.

    Raises :class:`SubmissionRejected` naming the file and the rule broken.
    Files the contract does not name are ignored (never read).
    """
    dir_fd = _open_dir(volume, rel_path)
    try:
        dest.mkdir(parents=True, exist_ok=False)
        os.chmod(dest, 0o700)
        out: list[SnapshotFile] = []
        total = 0
        for cf in contract.files:
            present = [n for n in cf.names if _exists(dir_fd, n)]
            if len(present) > 1:
                raise SubmissionRejected(
                    " and ".join(present),
                    "one file per role",
                    f"write only one of {sorted(cf.names)}",
                )
            if not present:
                if cf.required:
                    found = files_found(list(cf.names), _names_in(dir_fd))
                    raise SubmissionRejected(
                        " or ".join(cf.names),
                        "required file",
                        f"missing; the contract requires one of {sorted(cf.names)} ({cf.role}); "
                        f"{found}",
                    )
                continue
            name = present[0]
            sha = _copy_regular(dir_fd, name, dest / name, cf.max_bytes)
            total += (dest / name).stat().st_size
            if total > contract.max_total_bytes:
                raise SubmissionRejected(
                    name,
                    "total size limit",
                    f"submission exceeds {contract.max_total_bytes} bytes",
                )
            out.append(SnapshotFile(cf.role, name, cf.names[name], dest / name, sha))
        return out
    finally:
        with contextlib.suppress(OSError):
            os.close(dir_fd)


def staging_dir(snapshots: Path) -> Path:
    """A new, unused path for a snapshot being copied (:func:`snapshot_submission` creates it)."""
    return snapshots / f"{STAGING_PREFIX}{secrets.token_hex(16)}"


def _last_touched(path: Path) -> float | None:
    """The newest mtime of the directory and of what is directly in it; None if it is gone.

    A copy in progress creates files in the directory (its mtime) and writes them
    (theirs), so either is recent while the copy runs, however long one file takes.
    None too when it cannot be read: left for a later pass rather than guessed old.
    """
    try:
        newest = path.lstat().st_mtime
        with os.scandir(path) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return None
    return newest


def reclaim_snapshots(
    snapshots: Path,
    store: JobQueue,
    *,
    min_age_s: float = RECLAIM_MIN_AGE_S,
    now: float | None = None,
) -> list[str]:
    """Delete the snapshot dirs no job needs; returns their names, sorted.

    Safe while other evaluators share ``snapshots`` (replicas on one volume, evaluators
    of one host) and are submitting and running jobs:

    * ``<job_id>/`` of a job the store has QUEUED or RUNNING: kept, whatever its age
      (a restarted evaluator re-runs the job from it, another replica may be running
      it now);
    * ``<job_id>/`` of a terminal job: deleted (nobody reads it again);
    * ``ckpt-*/``: a checkpoint's snapshot, never deleted (an audit re-evaluates it;
      :data:`CHECKPOINT_PREFIX`);
    * ``<job_id>/`` of a job the store does not have, and ``staging-*/``: deleted
      only once untouched for ``min_age_s`` (:data:`RECLAIM_MIN_AGE_S`; by mtime,
      see :func:`_last_touched`). Younger, they may be a submission another process
      is copying right now, or one renamed into place whose job is being created:
      what a process that died left behind is reclaimed by a later pass.

    Symlinks and plain files are never followed or removed. ``now``: the time to
    measure ages from (default: this host's clock). A ValueError for a negative
    ``min_age_s``.
    """
    if min_age_s < 0:
        raise ValueError(f"min_age_s must be >= 0, got {min_age_s}")
    if not snapshots.is_dir():
        return []
    at = time.time() if now is None else now
    removed = []
    for entry in sorted(snapshots.iterdir()):
        if entry.is_symlink() or not entry.is_dir() or entry.name.startswith(CHECKPOINT_PREFIX):
            continue
        if not entry.name.startswith(STAGING_PREFIX):
            job = store.get(entry.name)
            if job is not None and not job.terminal:
                continue  # a queued or running job's: never
            if job is not None:  # terminal: nobody reads it again
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
                continue
        touched = _last_touched(entry)
        if touched is None or at - touched < min_age_s:
            continue  # gone already, or maybe in use by a live evaluator
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    if removed:
        log.info("removed %d snapshot dir(s) no job needs", len(removed))
    return removed


def snapshot_files(folder: Path, job: JobRecord, task: TaskSpec) -> list[SnapshotFile]:
    """The job's frozen files in ``folder``, in contract order, each re-hashed: OSError
    when one changed on disk since it was frozen (the job's stored SHA-256 is the truth)."""
    assert task.contract is not None
    out = []
    for cf in task.contract.files:
        for name, fmt in cf.names.items():
            if name in job.files:
                path = folder / name
                sha = hashlib.sha256(path.read_bytes()).hexdigest()
                if sha != job.files[name]:
                    raise OSError(f"snapshot {name} of {job.job_id} changed on disk")
                out.append(SnapshotFile(cf.role, name, fmt, path, sha))
    return out
