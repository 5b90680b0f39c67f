"""The run index's signing key: a per-user secret that vouches for the rows of the index.

Whoever can write a runs root can write ``RUNS_ROOT/index.sqlite3`` too, so a row of the
index (a run's summary and verdict) proves nothing by itself: a plain hash stored beside
it is recomputed by whoever rewrites it. Each row therefore carries an HMAC-SHA256 made
with a key that is *not* under the runs root: ``STATE_HOME/runs-index.key``
(:func:`~ale_robotics.paths.state_home`), 32 random bytes as hex, created on first use
with mode 0600. A reader checks the MAC of every row it takes from the index; one that
does not check was not written by this user's ale-robotics and is verified again from
the run's files.

A key file that anyone but its owner may read or write (or that another user owns) is
refused, as is one that is not 64 hex digits: :class:`IndexKeyError` says what to fix,
and the index then trusts no row at all (it verifies every run from its files).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.paths import state_home

__all__ = ["KEY_FILE", "IndexKey", "IndexKeyError", "ephemeral_key", "load_index_key"]

KEY_FILE = "runs-index.key"
"""The key's file name in :func:`~ale_robotics.paths.state_home`."""
_KEY_BYTES = 32


class IndexKeyError(Exception):
    """The key cannot be read or created; the message says why and what to do."""


@dataclass(frozen=True, repr=False)
class IndexKey:
    """A secret that signs index rows (its bytes are never shown in a repr)."""

    secret: bytes
    path: Path | None
    """The file it was read from; None for a key made for one process only."""

    @property
    def key_id(self) -> str:
        """Which key signed a row (16 hex digits; reveals nothing of the secret). Rows of
        other keys (another user sharing the runs root) are neither trusted nor touched."""
        return hashlib.sha256(b"ale-robotics runs index key id\0" + self.secret).hexdigest()[:16]

    def mac(self, message: bytes) -> str:
        """HMAC-SHA256 of ``message`` (hex)."""
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def checks(self, message: bytes, mac: str | None) -> bool:
        """Whether ``mac`` is this key's MAC of ``message`` (in constant time)."""
        return mac is not None and hmac.compare_digest(self.mac(message), mac)

    def __repr__(self) -> str:
        return f"IndexKey(key_id={self.key_id!r}, path={self.path!r})"


def ephemeral_key() -> IndexKey:
    """A key for this process only: rows it signs are trusted by nobody else."""
    return IndexKey(secrets.token_bytes(_KEY_BYTES), None)


def key_path() -> Path:
    """``STATE_HOME/runs-index.key``."""
    return state_home() / KEY_FILE


def load_index_key(path: Path | None = None) -> IndexKey:
    """The user's index key at ``path`` (default :func:`key_path`), created if missing.

    Raises :class:`IndexKeyError` when it can be neither read nor created, or is not
    private to this user.
    """
    path = path or key_path()
    try:
        return IndexKey(_read(path), path)
    except (FileNotFoundError, NotADirectoryError):  # none yet (or no directory to hold it)
        pass
    try:
        _create(path)
        return IndexKey(_read(path), path)
    except OSError as exc:
        raise IndexKeyError(
            f"cannot create {path} ({exc.strerror or exc}): make {path.parent} writable, "
            "or point XDG_STATE_HOME at a directory of yours"
        ) from None


def _read(path: Path) -> bytes:
    """The key's bytes; FileNotFoundError or NotADirectoryError when there is none yet."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexKeyError(
                f"{path} is a symbolic link: delete it (a new key is made)"
            ) from None
        raise IndexKeyError(f"cannot read {path} ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IndexKeyError(f"{path} is not a file: delete it (a new key is made)")
        if st.st_uid != os.getuid():
            raise IndexKeyError(
                f"{path} belongs to another user (uid {st.st_uid}): delete it (a new key is made)"
            )
        if st.st_mode & 0o077:
            raise IndexKeyError(
                f"{path} is open to other users (mode {stat.S_IMODE(st.st_mode):o}): "
                f"'chmod 600 {path}'"
            )
        text = os.read(fd, 4 * _KEY_BYTES).strip()
    except OSError as exc:
        raise IndexKeyError(f"cannot read {path} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) != _KEY_BYTES:
        raise IndexKeyError(
            f"{path} is not a key of {2 * _KEY_BYTES} hex digits: delete it (a new key is made)"
        )
    return secret


def _create(path: Path) -> None:
    """Write a new key, atomically: a process that loses the race reads the winner's."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(_KEY_BYTES) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # never replaces a key another process made meanwhile
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
