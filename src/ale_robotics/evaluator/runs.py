"""Runs of a shared evaluator: who a caller acts for, and the per-run agent tokens.

A shared evaluator (``evaluator serve`` without ``--run-id``) serves many runs at
once. Before this module, every agent got the state dir's one ``agent.token``
and the whole submission volume, so one run's agent could read, step and close
another run's sessions, query its jobs and read its files. Now the harness
registers each run with ``OpenRun``; the run gets a token of its own and a fresh
directory ``VOLUME/<run_id>/``, and every agent call is checked against the
:class:`Scope` its token carries, never against a field of the request.

Only the SHA-256 of a run token is kept (in memory and in ``STATE_DIR/runs.json``,
0600, so that a restarted evaluator still accepts the agents of open runs); a run
id is single use, because the run's hidden seeds derive from it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ale_robotics.errors import FailedPreconditionError, PermissionDeniedError
from ale_robotics.evaluator.state import write_private

__all__ = ["TRUSTED", "Access", "OpenedRun", "RunClosed", "RunRegistry", "Scope", "token_digest"]

log = logging.getLogger(__name__)


class Access(StrEnum):
    """What kind of caller a token (or the listener) makes of a call."""

    TRUSTED = "trusted"
    """The harness channel and in-process callers: every run."""
    RUN = "run"
    """One run's agent: a token from OpenRun, or the agent token of an evaluator bound
    to one run (``--run-id``)."""
    ANY_RUN = "any_run"
    """The state dir's agent token of a single-tenant shared evaluator (in-process
    ``serve()`` without ``per_run_tokens``): any run not opened with OpenRun."""
    NO_RUN = "no_run"
    """The state dir's agent token of a per-run-token evaluator: GetSpec and practice
    sessions outside any run (client seeds only, no run data)."""


@dataclass(frozen=True)
class Scope:
    """Who a call acts for; comes from the listener and the token, never from a request."""

    access: Access
    run_id: str = ""
    """The bound run (``Access.RUN`` only)."""
    task_id: str = ""
    """The run's task (``Access.RUN`` from OpenRun); empty: not bound to a task."""

    @property
    def bound(self) -> bool:
        return self.access is Access.RUN


TRUSTED = Scope(Access.TRUSTED)

NO_RUN_MESSAGE = (
    "this evaluator serves several runs, each with its own agent token: the shared "
    "agent.token only reads GetSpec and opens practice sessions outside any run. Run "
    "the agent through the harness (ale-robotics run --evaluator ...), which gets the "
    "run's token with OpenRun"
)


def token_digest(token: str | bytes) -> str:
    """SHA-256 (hex) of a bearer token: what the evaluator keeps and compares."""
    data = token.encode() if isinstance(token, str) else token
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class OpenedRun:
    """A registered run; ``agent_token`` is set only in the OpenRun answer, never stored."""

    run_id: str
    task_id: str
    token_sha256: str
    submission_dir: Path | None
    opened_unix: float
    closed_unix: float = 0.0
    agent_token: str = ""

    @property
    def open(self) -> bool:
        return self.closed_unix == 0.0


@dataclass(frozen=True)
class RunClosed:
    """What CloseRun ended (``Evaluator.close_run``)."""

    sessions_closed: int
    """Sessions of the run still open, closed now as by CloseSession."""
    jobs_cancelled: int
    """Queued and running jobs of the run, ended CANCELLED (``Evaluator.cancel_run``)."""


class RunRegistry:
    """Every run opened on this evaluator (open or closed), persisted in the state dir."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._runs: dict[str, OpenedRun] = {}
        self._by_digest: dict[str, str] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = json.loads(self._path.read_text(encoding="utf-8"))
        for run_id, r in data.get("runs", {}).items():
            sub = r.get("submission_dir") or None
            run = OpenedRun(
                run_id=run_id,
                task_id=r["task_id"],
                token_sha256=r["token_sha256"],
                submission_dir=Path(sub) if sub else None,
                opened_unix=float(r["opened_unix"]),
                closed_unix=float(r.get("closed_unix", 0.0)),
            )
            self._runs[run_id] = run
            if run.open:
                self._by_digest[run.token_sha256] = run_id

    def _save(self) -> None:
        runs = {
            r.run_id: {
                "task_id": r.task_id,
                "token_sha256": r.token_sha256,
                "submission_dir": str(r.submission_dir) if r.submission_dir else "",
                "opened_unix": r.opened_unix,
                "closed_unix": r.closed_unix,
            }
            for r in self._runs.values()
        }
        write_private(self._path, json.dumps({"runs": runs}, indent=1, sort_keys=True).encode())

    # -------------------------------------------------------------- queries --

    def known(self, run_id: str) -> bool:
        """Whether the run was opened with OpenRun (open or closed)."""
        with self._lock:
            return run_id in self._runs

    def get(self, run_id: str) -> OpenedRun | None:
        with self._lock:
            return self._runs.get(run_id)

    def by_token(self, token: bytes) -> OpenedRun | None:
        """The open run whose token this is; None for an unknown or revoked token.

        The lookup is by the token's SHA-256, so its timing depends on the digest,
        not on how much of a real token a guess shares.
        """
        digest = token_digest(token)
        with self._lock:
            run_id = self._by_digest.get(digest)
            run = self._runs.get(run_id) if run_id is not None else None
        if run is None or not hmac.compare_digest(run.token_sha256, digest):
            return None
        return run

    # ---------------------------------------------------------- transitions --

    def open(self, run_id: str, task_id: str, volume: Path | None) -> OpenedRun:
        """Register a run: a new token and a new, empty ``volume/<run_id>/``.

        ``run_id`` must already be checked (format, never used by the job store).
        """
        with self._lock:
            if run_id in self._runs:
                raise FailedPreconditionError(
                    f"run {run_id!r} was opened on this evaluator before; run ids are single "
                    "use (the run's hidden seeds derive from it): choose a new one"
                )
            sub = _make_run_dir(volume, run_id) if volume is not None else None
            token = secrets.token_urlsafe(32)
            run = OpenedRun(
                run_id=run_id,
                task_id=task_id,
                token_sha256=token_digest(token),
                submission_dir=sub,
                opened_unix=time.time(),
            )
            self._runs[run_id] = run
            self._by_digest[run.token_sha256] = run_id
            self._save()
        log.info("run %s opened for task %s", run_id, task_id)
        return dataclasses.replace(run, agent_token=token)

    def close(self, run_id: str) -> OpenedRun:
        """Revoke the run's token (idempotent); the run stays known, so its id stays used."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise FailedPreconditionError(f"run {run_id!r} was never opened with OpenRun")
            if run.open:
                self._by_digest.pop(run.token_sha256, None)
                run = dataclasses.replace(run, closed_unix=time.time())
                self._runs[run_id] = run
                self._save()
                log.info("run %s closed: its agent token is revoked", run_id)
        return run


def _make_run_dir(volume: Path, run_id: str) -> Path:
    """``volume/<run_id>/``, created now (never reused), writable by the agent's user.

    The agent writes it as the user that runs the harness (bwrap maps its uid
    65534 to that user). An evaluator running as that user owns the directory;
    one running as root hands it to the volume root's owner, which the operator
    sets to the harness's user.
    """
    path = volume / run_id
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise FailedPreconditionError(
            f"the submission directory of run {run_id!r} already exists on the volume; "
            "a run starts with a new, empty one: choose a new run id"
        ) from None
    except OSError as exc:
        raise FailedPreconditionError(
            f"cannot create the run's submission directory ({exc.strerror})"
        ) from None
    if os.geteuid() == 0:
        st = volume.stat()
        os.chown(path, st.st_uid, st.st_gid)
    return path


def check_task(scope: Scope, task_id: str) -> str:
    """The task a call names, defaulted to the run's; another task than the run's is refused."""
    if scope.bound and scope.task_id:
        if not task_id:
            return scope.task_id
        if task_id != scope.task_id:
            raise PermissionDeniedError(
                f"this run is for task {scope.task_id!r}; its token cannot act on another task"
            )
    return task_id
