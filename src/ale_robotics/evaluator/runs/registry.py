"""Runs of a shared evaluator: who a caller acts for, and the per-run agent tokens.

A shared evaluator (``evaluator serve`` without ``--run-id``) serves many runs at
once. Before this module, every agent got the state dir's one ``agent.token``
and the whole submission volume, so one run's agent could read, step and close
another run's sessions, query its jobs and read its files. Now the harness
registers each run with ``OpenRun``; the run gets a token of its own and a fresh
directory ``VOLUME/<run_id>/``, and every agent call is checked against the
:class:`Scope` its token carries, never against a field of the request.

Only the SHA-256 of a run token is kept, in the job store (:class:`RunRegistry`):
every replica sharing the store accepts the agents of a run opened on any of
them, a restarted evaluator still accepts those of open runs, and CloseRun on
one replica revokes the token on all at once. A run id is single use, because
the run's hidden seeds derive from it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ale_robotics.errors import FailedPreconditionError, PermissionDeniedError
from ale_robotics.evaluator.store import RunRecord, RunStore

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
    ``serve()`` without ``per_run_tokens``, a library mode no command starts): any run
    not opened with OpenRun."""
    NO_RUN = "no_run"
    """The state dir's agent token of a per-run-token evaluator (``evaluator serve``
    without ``--run-id``): GetSpec only. Before issue 26 it also opened practice sessions
    outside any run, uncounted; every embedded run handed that file to its agent, so a
    state dir's ``agent.token`` is treated as leaked and practises nowhere."""
    PRACTICE = "practice"
    """The operator's practice token (``STATE_DIR/practice.token``, only with ``evaluator
    serve --allow-practice-without-run``): GetSpec and practice sessions outside any run
    (client seeds only, no run data). A secret of its own that no harness reads and no
    agent is given, so no run's sandbox can reach this uncounted practice."""


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

    @property
    def runless(self) -> bool:
        """Whether the token acts for no run at all (the shared agent.token, the operator's
        practice token): no job, no run session, no run data."""
        return self.access in (Access.NO_RUN, Access.PRACTICE)


TRUSTED = Scope(Access.TRUSTED)

NO_RUN_MESSAGE = (
    "this evaluator serves several runs, each with its own agent token: the shared "
    "agent.token only reads GetSpec. Run the agent through the harness (ale-robotics run "
    "--evaluator ...), which gets the run's token with OpenRun; for practice outside any "
    "run, the operator starts the evaluator with --allow-practice-without-run and uses "
    "STATE_DIR/practice.token"
)
PRACTICE_MESSAGE = (
    "the operator's practice token opens practice sessions outside any run only (client "
    "seeds, no run data); a run's calls need the token the harness got for it with OpenRun"
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
    """What CloseRun ended (:meth:`.service.RunService.close_run`)."""

    sessions_closed: int
    """Sessions of the run still open, closed now as by CloseSession."""
    jobs_cancelled: int
    """Queued and running jobs of the run, ended CANCELLED
    (:meth:`.batch.jobs.JobService.cancel_run`)."""


class RunRegistry:
    """Every run opened with OpenRun (open or closed), kept in the job store.

    Replicas sharing a store share the registry: a run opened on one is known to
    all (its token, its submission directory), its id is taken for all, and
    CloseRun on any one revokes the token for all at once, because
    :meth:`by_token` and :meth:`get` of an open run read the store on every call.
    The only cache holds what can no longer change: that a run id is known (runs
    are never forgotten) and a closed run (closing is final).
    """

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._closed: dict[str, OpenedRun] = {}

    def _remember(self, record: RunRecord | None) -> OpenedRun | None:
        if record is None:
            return None
        run = _opened(record)
        with self._lock:
            self._known.add(run.run_id)
            if not run.open:
                self._closed[run.run_id] = run
        return run

    # -------------------------------------------------------------- queries --

    def known(self, run_id: str) -> bool:
        """Whether the run was opened with OpenRun (open or closed), on any replica."""
        with self._lock:
            if run_id in self._known:
                return True
        return self.get(run_id) is not None

    def get(self, run_id: str) -> OpenedRun | None:
        """The run as the store has it now (a closed run from the cache: it stays closed).

        ``""`` (a session outside any run) is never a run id (:mod:`.access` checks their
        format), so it is answered without the store: an agent-token session of a run-less
        evaluator asks on every Step."""
        if not run_id:
            return None
        with self._lock:
            closed = self._closed.get(run_id)
        if closed is not None:
            return closed
        return self._remember(self._store.get_run(run_id))

    def by_token(self, token: bytes) -> OpenedRun | None:
        """The open run whose token this is; None for an unknown or revoked token.

        The lookup is by the token's SHA-256, so its timing depends on the digest,
        not on how much of a real token a guess shares; the stored digest is then
        compared in constant time. Always read from the store, never cached: a token
        revoked on another replica is refused here at once.
        """
        digest = token_digest(token)
        run = self._remember(self._store.open_run_by_token(digest))
        if run is None or not run.open or not hmac.compare_digest(run.token_sha256, digest):
            return None
        return run

    # ---------------------------------------------------------- transitions --

    def open(self, run_id: str, task_id: str, volume: Path | None) -> OpenedRun:
        """Register a run: a new token and a new, empty ``volume/<run_id>/``.

        ``run_id`` must already be checked (format, never used by the job store).
        Of replicas opening one run id at once, one wins; the others get
        FAILED_PRECONDITION and leave no directory behind.
        """
        if self.known(run_id):
            raise FailedPreconditionError(_REUSED.format(run_id=run_id))
        sub = _make_run_dir(volume, run_id) if volume is not None else None
        token = secrets.token_urlsafe(32)
        record = RunRecord(
            run_id=run_id,
            task_id=task_id,
            token_sha256=token_digest(token),
            submission_dir=str(sub) if sub is not None else "",
            opened_unix=time.time(),
        )
        try:
            added = self._store.add_run(record)
        except BaseException:
            # not recorded (or not known to be): the directory must not outlive it
            if sub is not None:
                with contextlib.suppress(OSError):
                    sub.rmdir()
            raise
        if not added:  # another replica took the id between the check and here
            if sub is not None:
                with contextlib.suppress(OSError):
                    sub.rmdir()
            raise FailedPreconditionError(_REUSED.format(run_id=run_id))
        with self._lock:
            self._known.add(run_id)
        log.info("run %s opened for task %s", run_id, task_id)
        return dataclasses.replace(_opened(record), agent_token=token)

    def close(self, run_id: str) -> OpenedRun:
        """Revoke the run's token (idempotent) for every replica; the run stays known, so
        its id stays used."""
        before = self.get(run_id)
        if before is None:
            raise FailedPreconditionError(f"run {run_id!r} was never opened with OpenRun")
        if not before.open:
            return before
        run = self._remember(self._store.revoke_run(run_id))
        assert run is not None  # runs are never deleted
        log.info("run %s closed: its agent token is revoked", run_id)
        return run


_REUSED = (
    "run {run_id!r} was opened on this evaluator before; run ids are single use (the run's "
    "hidden seeds derive from it): choose a new one"
)


def _opened(record: RunRecord) -> OpenedRun:
    return OpenedRun(
        run_id=record.run_id,
        task_id=record.task_id,
        token_sha256=record.token_sha256,
        submission_dir=Path(record.submission_dir) if record.submission_dir else None,
        opened_unix=record.opened_unix,
        closed_unix=record.closed_unix,
    )


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
