"""The evaluator's state directory: secret, tokens, signing key, job store, snapshots.

Everything secret is created 0600 on first start and reused afterwards, so an
evaluator restarted on the same directory keeps deriving the same hidden seeds
and signing with the same key.

Layout::

    STATE_DIR/
      secret            32 random bytes (hidden-seed secret), 0600
      agent.token       bearer token of the agent listener, 0600
      harness.token     bearer token of the harness listener, 0600
      signing_key.pem   Ed25519 key for trusted-evaluator events, 0600
      runs.json         runs opened with OpenRun (SHA-256 of their agent tokens), 0600
      jobs.sqlite3      job store (WAL)
      snapshots/<job>/  frozen copies of submitted files
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ale_robotics.seeds import SECRET_BYTES, new_secret

__all__ = ["StateDir", "read_token", "write_private"]


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 (never briefly world-readable) and write ``data``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_token(path: Path) -> str:
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


class StateDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        self.snapshots = root / "snapshots"
        self.snapshots.mkdir(exist_ok=True)

    @property
    def db_path(self) -> Path:
        return self.root / "jobs.sqlite3"

    @property
    def signing_key_path(self) -> Path:
        return self.root / "signing_key.pem"

    @property
    def runs_path(self) -> Path:
        """The shared evaluator's run registry (:mod:`.runs`); kept so a restart keeps runs."""
        return self.root / "runs.json"

    def secret(self) -> bytes:
        path = self.root / "secret"
        if not path.exists():
            write_private(path, new_secret())
        data = path.read_bytes()
        if len(data) != SECRET_BYTES:
            raise ValueError(f"{path} must hold exactly {SECRET_BYTES} bytes")
        return data

    def token(self, role: str, given: Path | None = None) -> str:
        """The token for a listener: from ``given`` if set, else ``<role>.token``, created once."""
        if given is not None:
            return read_token(given)
        path = self.root / f"{role}.token"
        if not path.exists():
            write_private(path, (secrets.token_urlsafe(32) + "\n").encode())
        return read_token(path)
