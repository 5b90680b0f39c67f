"""The operator's paper library: papers attached to a task, kept in the state dir.

The project ships no papers. An operator attaches them (``ale-robotics tasks
attach-paper ID FILE...``) into the evaluator's state directory, and every run of the
task finds them in its task packet (``$ALE_TASK_DIR/paper/``)::

    STATE_DIR/tasks/<task-id>/paper/
      <name>.pdf | .md | .markdown | .txt   the attached files, names sanitized
      index.json                            {"schema_version", "task_id", "papers": [
                                              {"name", "original_name", "bytes",
                                               "sha256", "media_type", "attached_at"}]}

``STATE_DIR`` defaults to the embedded evaluator's (``state_home()/evaluator``, as
:func:`ale_robotics.harness.options.default_state_dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ale_robotics.errors import ConfigError, InvalidArgumentError
from ale_robotics.paths import state_home

__all__ = [
    "INDEX_NAME",
    "MAX_PAPER_BYTES",
    "MEDIA_TYPES",
    "AttachedPaper",
    "attach_papers",
    "default_state_dir",
    "list_papers",
    "paper_dir",
    "sanitize_name",
]

INDEX_NAME = "index.json"
MAX_PAPER_BYTES = 50 * 1024 * 1024
"""Largest file one attach accepts (a paper with its appendix fits many times over)."""
MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
}
"""The accepted kinds of file, by extension (the content is checked too)."""
_NAME_MAX = 100
_BAD = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class AttachedPaper:
    """One attached file, as the index records it."""

    name: str
    original_name: str
    bytes: int
    sha256: str
    media_type: str
    attached_at: str


def default_state_dir() -> Path:
    """The embedded evaluator's state dir, where the library lives by default."""
    return state_home() / "evaluator"


def paper_dir(state_dir: Path, task_id: str) -> Path:
    """``STATE_DIR/tasks/<task-id>/paper``."""
    return state_dir / "tasks" / task_id / "paper"


def sanitize_name(original: str) -> str:
    """A plain file name: its base name, characters outside ``[A-Za-z0-9._-]`` as ``_``,
    no leading dot, the extension lower-cased, at most 100 characters."""
    base = original.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    stem = _BAD.sub("_", stem).strip("._-") or "paper"
    ext = _BAD.sub("", ext).lower()
    suffix = f".{ext}" if ext else ""
    return stem[: _NAME_MAX - len(suffix)] + suffix


def list_papers(state_dir: Path, task_id: str) -> list[AttachedPaper]:
    """The task's attached papers, from its index (empty when none)."""
    index = paper_dir(state_dir, task_id) / INDEX_NAME
    try:
        raw = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(f"cannot read the paper index {index}: {exc.strerror}") from exc
    try:
        doc = json.loads(raw)
        return [AttachedPaper(**p) for p in doc["papers"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"paper index {index} is unreadable ({exc}); remove it and attach the papers again"
        ) from exc


def attach_papers(state_dir: Path, task_id: str, files: list[Path]) -> list[AttachedPaper]:
    """Copy ``files`` into the task's library and record them; returns what was attached.

    Every file is checked before any is copied (exists, a regular file, an accepted kind
    whose content matches, within :data:`MAX_PAPER_BYTES`), so a bad one attaches
    nothing. A file whose sanitized name is already attached replaces it.
    """
    checked = [(f, _check(f)) for f in files]
    dest = paper_dir(state_dir, task_id)
    dest.mkdir(parents=True, exist_ok=True)
    papers = {p.name: p for p in list_papers(state_dir, task_id)}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    added: list[AttachedPaper] = []
    for path, (data, media_type) in checked:
        name = sanitize_name(path.name)
        _write_atomic(dest / name, data)
        paper = AttachedPaper(
            name=name,
            original_name=path.name,
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            media_type=media_type,
            attached_at=now,
        )
        papers[name] = paper
        added.append(paper)
    index = {
        "schema_version": 1,
        "task_id": task_id,
        "papers": [asdict(p) for p in sorted(papers.values(), key=lambda p: p.name)],
    }
    _write_atomic(dest / INDEX_NAME, (json.dumps(index, indent=2) + "\n").encode())
    return added


def _check(path: Path) -> tuple[bytes, str]:
    """The file's bytes and media type, or a one-line refusal."""
    if not path.exists():
        raise InvalidArgumentError(f"{path}: no such file")
    if not path.is_file():
        raise InvalidArgumentError(f"{path}: not a regular file")
    ext = path.suffix.lower()
    media_type = MEDIA_TYPES.get(ext)
    if media_type is None:
        kinds = ", ".join(sorted(MEDIA_TYPES))
        given = repr(ext) if ext else "a file without extension"
        raise InvalidArgumentError(
            f"{path}: a paper must be a PDF, Markdown or text file ({kinds}), not {given}"
        )
    size = path.stat().st_size
    if size > MAX_PAPER_BYTES:
        raise InvalidArgumentError(
            f"{path}: {size:,} bytes, over the limit of {MAX_PAPER_BYTES:,} bytes per paper"
        )
    data = path.read_bytes()
    if len(data) > MAX_PAPER_BYTES:
        raise InvalidArgumentError(f"{path}: grew past {MAX_PAPER_BYTES:,} bytes while read")
    if media_type == "application/pdf":
        if not data.startswith(b"%PDF-"):
            raise InvalidArgumentError(f"{path}: named .pdf but not a PDF (no %PDF- header)")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                f"{path}: named {ext} but not UTF-8 text (byte {exc.start})"
            ) from None
        if "\x00" in text:
            raise InvalidArgumentError(f"{path}: named {ext} but holds NUL bytes (binary)")
    return data, media_type


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".attach-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
