"""The session manager: opens, finds, serializes, reaps and closes interactive sessions.

Limits come from the task config's ``session`` block and are enforced here, each
refusal naming the limit it hit:

* ``max_sessions`` concurrent sessions per evaluator (RESOURCE_EXHAUSTED);
* ``max_envs_per_session`` (RESOURCE_EXHAUSTED);
* ``idle_timeout_s``: a reaper thread closes sessions nobody called for that
  long (an eval session is then recorded as it stands);
* ``call_deadline_s``: calls on one session run one at a time, and a call that
  cannot get its session within the deadline (or the client's own, if
  shorter) is DEADLINE_EXCEEDED instead of queueing without bound. The work of
  one call is bounded by ``max_envs_per_session`` and cannot be interrupted
  half way without desynchronizing the client, so the deadline is not applied
  to it.

A session id is 128 random bits; every call but OpenSession names one.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ale_robotics.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator.eval_record import EvalRecorder
from ale_robotics.evaluator.vector_session import Session, SessionKind, make_envs
from ale_robotics.tasks.spec import SessionSettings, TaskMode, TaskSpec

if TYPE_CHECKING:
    from ale_robotics.evaluator.core import Evaluator

__all__ = ["SessionManager", "settings_for"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_DEFAULT_SETTINGS = SessionSettings()


def settings_for(task: TaskSpec) -> SessionSettings:
    """The task's session limits (defaults for a task that declares none)."""
    return task.session if task.session is not None else _DEFAULT_SETTINGS


class SessionManager:
    """All open sessions of one evaluator, shared by its agent and harness listeners."""

    def __init__(self, evaluator: Evaluator, reap_interval_s: float = 1.0) -> None:
        self._ev = evaluator
        self._sessions: dict[str, Session] = {}
        self._opening = 0  # slots reserved by opens still building their envs
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reap_interval_s = reap_interval_s
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle --

    def start(self) -> None:
        self._thread = threading.Thread(target=self._reap_loop, name="ale-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop reaping and release every env (unfinished eval sessions are recorded)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            ids = list(self._sessions)
        for sid in ids:
            self._close(sid, "the evaluator shut down", infrastructure=True)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    # ----------------------------------------------------------------- calls --

    def open(self, task: TaskSpec, kind: SessionKind, num_envs: int, run_id: str) -> Session:
        """A new session; ``run_id`` must already be checked (eval sessions are run-bound)."""
        if task.mode is not TaskMode.INTERACTIVE:
            raise FailedPreconditionError(
                f"task {task.id} is a {task.mode.value} task, not interactive: it offers no "
                "sessions (see GetSpec.mode and the submission contract)"
            )
        limits = settings_for(task)
        if kind is SessionKind.PRACTICE and not limits.practice_allowed:
            raise FailedPreconditionError(f"task {task.id} allows no practice sessions")
        if num_envs < 1:
            raise InvalidArgumentError(f"num_envs must be at least 1, got {num_envs}")
        if num_envs > limits.max_envs_per_session:
            raise ResourceExhaustedError(
                f"num_envs {num_envs} is over the limit session.max_envs_per_session = "
                f"{limits.max_envs_per_session} of task {task.id}"
            )
        if kind is SessionKind.EVAL and num_envs > task.eval.episodes:
            raise InvalidArgumentError(
                f"an eval session of task {task.id} runs {task.eval.episodes} episodes; "
                f"num_envs {num_envs} would leave envs without one"
            )
        self.reap()
        sid = f"sess-{secrets.token_hex(16)}"
        with self._lock:
            count = len(self._sessions) + self._opening
            cap = self._ev.config.max_sessions or limits.max_sessions
            if count >= cap:
                where = (
                    "the evaluator's --max-sessions"
                    if self._ev.config.max_sessions
                    else "the limit session.max_sessions"
                )
                raise ResourceExhaustedError(
                    f"{count} sessions are open, {where} = "
                    f"{cap}: close one with CloseSession (idle sessions close "
                    f"after session.idle_timeout_s = {limits.idle_timeout_s:g}s)"
                )
            # Reserve the slot before the slow part (env creation) so that concurrent
            # opens cannot overshoot the limit.
            self._opening += 1
        envs: list[Any] = []
        try:
            # Envs first: the eval job row (the run's one eval session) is created only
            # once nothing else can fail.
            envs = make_envs(task, num_envs)
            recorder = (
                EvalRecorder(self._ev, task, run_id, sid, num_envs)
                if kind is SessionKind.EVAL
                else None
            )
            session = Session(sid, task, kind, envs, run_id, recorder)
        except BaseException:
            for env in envs:
                env.close()
            with self._lock:
                self._opening -= 1
            raise
        with self._lock:
            self._opening -= 1
            self._sessions[sid] = session
        log.info("session %s opened: %s, %s, %d env(s)", sid, task.id, kind.value, num_envs)
        return session

    def call(
        self, session_id: str, client_timeout_s: float | None, fn: Callable[[Session], T]
    ) -> T:
        """Run ``fn`` on the session, alone, within the per-call deadline."""
        session = self._get(session_id)
        deadline = settings_for(session.task).call_deadline_s
        if client_timeout_s is not None:
            deadline = min(deadline, max(client_timeout_s, 0.0))
        if not session.lock.acquire(timeout=deadline):
            raise DeadlineExceededError(
                f"session {session_id} stayed busy with another call past the per-call deadline "
                f"({deadline:g}s); calls on one session run one at a time"
            )
        try:
            if session.closed:
                raise NotFoundError(f"session {session_id} was closed")
            session.last_used = time.monotonic()
            return fn(session)
        finally:
            session.last_used = time.monotonic()
            session.lock.release()

    def close(self, session_id: str) -> int:
        """Close one session; returns the episodes it completed (eval sessions)."""
        self._get(session_id)
        return self._close(session_id, "closed by the client")

    def close_run(self, run_id: str, why: str) -> int:
        """Close every session of a run (the harness, once the agent has exited)."""
        with self._lock:
            ids = [s.id for s in self._sessions.values() if s.run_id == run_id]
        for sid in ids:
            self._close(sid, why)
        return len(ids)

    def reap(self) -> list[str]:
        """Close sessions idle past their task's ``idle_timeout_s``; returns their ids."""
        now = time.monotonic()
        with self._lock:
            idle = [
                s
                for s in self._sessions.values()
                if now - s.last_used > settings_for(s.task).idle_timeout_s and not s.lock.locked()
            ]
        for s in idle:
            timeout = settings_for(s.task).idle_timeout_s
            log.info("session %s idle for over %gs: closing it", s.id, timeout)
            self._close(s.id, f"idle for over {timeout:g}s")
        return [s.id for s in idle]

    # --------------------------------------------------------------- private --

    def _get(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise NotFoundError(
                f"no open session {session_id!r}: it was never opened, was closed, or was "
                "reaped after its idle timeout"
            )
        return session

    def _close(self, session_id: str, why: str, infrastructure: bool = False) -> int:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return 0
        # Wait for a call in flight (bounded: a call never waits on anything slow).
        with session.lock:
            return session.close(why, infrastructure=infrastructure)

    def _reap_loop(self) -> None:
        while not self._stop.wait(self._reap_interval_s):
            try:
                self.reap()
            except Exception:  # keep reaping; a failure here is logged, never silent
                log.exception("reaping idle sessions failed")
