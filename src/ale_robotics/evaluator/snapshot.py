"""Freeze a submission: copy the contract's files out of the shared volume, with their SHA-256.

The volume is written by an untrusted agent, so the copy is the only thing the
evaluator reads afterwards (later writes change nothing), and copying is where
the file-system rules are enforced: plain files only (no symlinks, no hard
links, no devices), no path outside the volume, size limits checked while
reading so a file growing under us cannot blow the limit.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath

from ale_robotics.tasks.spec import FileFormat, SubmissionContract

__all__ = ["SnapshotFile", "SubmissionRejected", "snapshot_submission"]

_CHUNK = 1 << 20


class SubmissionRejected(Exception):
    """The submission breaks a rule; ends the job as REJECTED with this message."""

    def __init__(self, file: str, rule: str, detail: str) -> None:
        self.file = file
        self.rule = rule
        self.detail = detail
        super().__init__(f"{file}: {detail} (rule: {rule})")


class SnapshotFile:
    """A frozen copy of one contract file."""

    def __init__(self, role: str, name: str, fmt: FileFormat, path: Path, sha256: str) -> None:
        self.role = role
        self.name = name
        self.format = fmt
        self.path = path
        self.sha256 = sha256


def _resolve_dir(volume: Path, rel: str) -> Path:
    """The submission directory inside the volume, refusing any escape or link on the way."""
    if "\x00" in rel:
        raise SubmissionRejected(repr(rel), "path", "submission path contains a NUL byte")
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        raise SubmissionRejected(
            rel, "path", "submission path must be relative to the submission volume"
        )
    if any(part == ".." for part in pure.parts):
        raise SubmissionRejected(rel, "path", "submission path must not contain '..'")
    current = volume
    for part in pure.parts:
        if part == ".":
            continue
        current = current / part
        try:
            st = os.lstat(current)
        except OSError:
            raise SubmissionRejected(rel, "path", "submission directory does not exist") from None
        if stat.S_ISLNK(st.st_mode):
            raise SubmissionRejected(rel, "no symlinks", f"{part!r} is a symbolic link")
        if not stat.S_ISDIR(st.st_mode):
            raise SubmissionRejected(rel, "path", f"{part!r} is not a directory")
    return current


def _copy_regular(src: Path, dest: Path, shown: str, max_bytes: int) -> str:
    try:
        st = os.lstat(src)
    except OSError as exc:
        raise SubmissionRejected(shown, "readable", f"cannot stat: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise SubmissionRejected(shown, "no symlinks", "is a symbolic link; write a plain file")
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionRejected(shown, "regular file", "is not a regular file")
    if st.st_nlink > 1:
        raise SubmissionRejected(
            shown, "no hard links", f"has {st.st_nlink} hard links; write a fresh file"
        )
    if st.st_size == 0:
        raise SubmissionRejected(shown, "non-empty", "is empty")
    if st.st_size > max_bytes:
        raise SubmissionRejected(
            shown, "size limit", f"is {st.st_size} bytes; the contract allows {max_bytes}"
        )
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SubmissionRejected(shown, "readable", f"cannot open: {exc.strerror}") from None
    digest = hashlib.sha256()
    total = 0
    try:
        fst = os.fstat(fd)
        if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(fst.st_mode):
            raise SubmissionRejected(shown, "stable", "was replaced while being read")
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while chunk := os.read(fd, _CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    raise SubmissionRejected(
                        shown, "size limit", f"grew past {max_bytes} bytes while being read"
                    )
                digest.update(chunk)
                os.write(out, chunk)
            os.fsync(out)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    if total == 0:
        raise SubmissionRejected(shown, "non-empty", "is empty")
    return digest.hexdigest()


def snapshot_submission(
    volume: Path, rel_path: str, contract: SubmissionContract, dest: Path
) -> list[SnapshotFile]:
    """Copy the files the contract names from ``volume/rel_path`` into ``dest``.

    Raises :class:`SubmissionRejected` naming the file and the rule broken.
    Files the contract does not name are ignored (never read).
    """
    src_dir = _resolve_dir(volume, rel_path)
    dest.mkdir(parents=True, exist_ok=False)
    os.chmod(dest, 0o700)
    out: list[SnapshotFile] = []
    total = 0
    for cf in contract.files:
        present = [n for n in cf.names if os.path.lexists(src_dir / n)]
        if len(present) > 1:
            raise SubmissionRejected(
                " and ".join(present), "one file per role", f"write only one of {sorted(cf.names)}"
            )
        if not present:
            if cf.required:
                raise SubmissionRejected(
                    " or ".join(cf.names),
                    "required file",
                    f"missing; the contract requires one of {sorted(cf.names)} ({cf.role})",
                )
            continue
        name = present[0]
        sha = _copy_regular(src_dir / name, dest / name, name, cf.max_bytes)
        total += (dest / name).stat().st_size
        if total > contract.max_total_bytes:
            raise SubmissionRejected(
                name, "total size limit", f"submission exceeds {contract.max_total_bytes} bytes"
            )
        out.append(SnapshotFile(cf.role, name, cf.names[name], dest / name, sha))
    return out
