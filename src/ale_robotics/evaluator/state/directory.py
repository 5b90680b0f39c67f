"""The evaluator's state directory: secret, tokens, signing key, job store, snapshots.

Everything secret is created 0600 on first start and reused afterwards, so an
evaluator restarted on the same directory keeps deriving the same hidden seeds
and signing with the same key.

Several evaluators may share the directory (replicas on several hosts on one
volume, started together): each file is created once, atomically
(:func:`create_private`), and every process uses what is on disk, never a value
of its own that lost the race.

Layout::

    STATE_DIR/
      secret            32 random bytes (hidden-seed secret), 0600
      agent.token       bearer token of a shared evaluator's agent listener, 0600: GetSpec
                        only; never given to an agent (runs get theirs from OpenRun)
      harness.token     bearer token of the harness listener, 0600
      practice.token    the operator's token for practice outside any run, 0600; made only
                        by ``evaluator serve --allow-practice-without-run``, given to no agent
      run-tokens/<run_id>.agent.token
                        the agent token of ``evaluator serve --run-id <run_id>`` (an
                        embedded evaluator keeps its run's token in memory only)
      signing_key.pem   Ed25519 key for trusted-evaluator events, 0600
      jobs.sqlite3      job store (WAL), unless --store names another; it also holds
                        the runs opened with OpenRun and their practice step counts
      snapshots/<job>/  frozen copies of submitted files
      snapshots/ckpt-<id>/  a run's checkpoints (SubmitCheckpoint), kept for the audit
      videos/<run_id>/  what a run's evaluation videos are made from, and the videos
                        (:mod:`ale_robotics.evaluator.videos.store`), until the run closes
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from pathlib import Path

from ale_robotics.errors import InvalidArgumentError

__all__ = [
    "DB_NAME",
    "StateDir",
    "StateDirError",
    "create_private",
    "read_token",
    "write_private",
]


class StateDirError(InvalidArgumentError):
    """The state directory cannot be used: not a directory, not writable, or not made
    private (0700). The operator's to fix (another ``--state-dir``), said in one line."""


def _private_temp(path: Path, data: bytes) -> Path:
    """A new 0600 file beside ``path`` holding ``data``, flushed to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Create or replace ``path`` with mode 0600 (never briefly world-readable) and ``data``.

    Replaces whatever is there: for a file only this process writes. A file other
    processes may create at the same time (the secret, a token) is made with
    :func:`create_private` instead.
    """
    tmp = _private_temp(path, data)
    os.replace(tmp, path)


def create_private(path: Path, data: bytes) -> bool:
    """Create ``path`` (mode 0600) holding ``data`` unless it exists; whether this call did.

    The data is written to a temporary file and flushed, then hard-linked into
    place: the link fails if another process created ``path`` first (its file is
    kept, ``data`` dropped), so however many processes race, one file wins, and a
    reader never sees a partly written one. Callers read ``path`` afterwards, and so
    all use the winner's bytes.
    """
    tmp = _private_temp(path, data)
    try:
        os.link(tmp, path)
        created = True
    except FileExistsError:
        created = False
    finally:
        tmp.unlink(missing_ok=True)
    if created:
        _fsync_dir(path.parent)
    return created


def read_token(path: Path) -> str:
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


DB_NAME = "jobs.sqlite3"
"""The SQLite job store's file in a state dir (the default store)."""


class StateDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        try:
            root.mkdir(parents=True, exist_ok=True)
            # chmod only where it changes the mode: on a read-only mount it always fails
            if stat.S_IMODE(root.stat().st_mode) != 0o700:
                os.chmod(root, 0o700)
            self.snapshots = root / "snapshots"
            self.snapshots.mkdir(exist_ok=True)
            # One write now (an unnamed file, dropped): a directory that takes none fails
            # here, in one line, not at the first secret, token or job written later.
            with tempfile.TemporaryFile(dir=root):
                pass
        except OSError as exc:
            where = " (its snapshots/)" if str(exc.filename) == str(root / "snapshots") else ""
            raise StateDirError(
                f"the evaluator's state dir {root} cannot be used: {exc.strerror or exc}{where}; "
                "give a directory this user can write (--state-dir)"
            ) from None

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def signing_key_path(self) -> Path:
        return self.root / "signing_key.pem"

    def secret(self) -> bytes:
        """The hidden-seed secret, created on first use (:func:`create_private`: every
        process sharing the directory gets the same bytes, the ones on disk)."""
        from ale_robotics.seeds import SECRET_BYTES, new_secret  # seeds import cryptography

        path = self.root / "secret"
        if not path.exists():
            create_private(path, new_secret())
        data = path.read_bytes()
        if len(data) != SECRET_BYTES:
            raise ValueError(f"{path} must hold exactly {SECRET_BYTES} bytes")
        return data

    def run_agent_token_file(self, run_id: str) -> Path:
        """``run-tokens/<run_id>.agent.token``: the agent token of an evaluator bound to
        ``run_id`` (``evaluator serve --run-id``), created once (a restart on the same run
        keeps it), a secret of that run alone. ``run_id`` must be a checked run id."""
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError(f"not a run id: {run_id!r}")
        path = self.root / "run-tokens" / f"{run_id}.agent.token"
        if not path.exists():
            path.parent.mkdir(mode=0o700, exist_ok=True)
            create_private(path, (secrets.token_urlsafe(32) + "\n").encode())
        return path

    def has_run_token(self, run_id: str) -> bool:
        """Whether ``evaluator serve --run-id <run_id>`` was started on this directory (its
        token file is here): that command, restarted, takes the run's jobs over."""
        if not run_id or "/" in run_id or run_id.startswith("."):
            return False
        return (self.root / "run-tokens" / f"{run_id}.agent.token").exists()

    def token(self, role: str, given: Path | None = None) -> str:
        """The token for a listener: from ``given`` if set, else ``<role>.token``, created once
        (like the secret, the same for every process sharing the directory)."""
        if given is not None:
            return read_token(given)
        path = self.root / f"{role}.token"
        if not path.exists():
            create_private(path, (secrets.token_urlsafe(32) + "\n").encode())
        return read_token(path)
