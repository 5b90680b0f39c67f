"""The session manager: opens, finds, serializes, reaps and closes interactive sessions.

Limits come from the task config's ``session`` block and are enforced here, each
refusal naming the limit it hit:

* ``max_sessions`` concurrent sessions per run (RESOURCE_EXHAUSTED, naming the
  run's open sessions), so that one run's agent cannot starve another's on a
  shared evaluator; run-less practice sessions (the shared agent token's) count
  as one more run. ``max_sessions_total`` caps all runs together, a safety net
  for the host (``--max-sessions-total``);
* ``max_envs_per_session`` (RESOURCE_EXHAUSTED);
* ``idle_timeout_s``: a reaper thread closes sessions nobody called for that
  long (an eval session is then completed with the null action and recorded);
* a watched session (WatchSessions) whose watch stream ended, i.e. whose client
  process died or lost its connection, is closed the same way ``orphan_grace_s``
  later unless a new watch names it or a call uses it (:meth:`attach`,
  :meth:`unwatch`). gRPC tells a server that a peer went away only through the
  calls it has open, so a liveness signal needs one open call: one stream per
  client process (not per session) keeps that to one server thread per agent;
* ``call_deadline_s``: calls on one session run one at a time, and a call that
  cannot get its session within the deadline (or the client's own, if
  shorter) is DEADLINE_EXCEEDED instead of queueing without bound. The work of
  one call is bounded by ``max_envs_per_session`` and cannot be interrupted
  half way without desynchronizing the client, so the deadline is not applied
  to it.

A session id is 128 random bits; every call but OpenSession names one. A
session belongs to its run: a caller bound to another run gets the NOT_FOUND of
an id that never existed (:meth:`.runs.access.RunAccess.visible`).

Closing an eval session the agent left unfinished simulates the rest of its
budget with the null action (:meth:`Session.close`), which takes up to a few
seconds. It runs holding only that session's own lock, after the session has
left the table, so no other session's call waits on it: CloseSession and the
harness's close of a run wait for it (their answer then covers the whole
budget), and a reap hands it to a thread of its own, so an OpenSession that
reaps on its way never waits either. :meth:`stop` lets completions in flight
finish within ``finish_grace_s``, then aborts them, which records the run as an
infrastructure failure: shutting down never leaves an eval job RUNNING and
never scores a budget it did not simulate.

Practice sessions of a run charge the run's training budget
(:mod:`.runs.training_budget`); run-less ones (no run to charge) charge nothing.
Sessions open on interactive tasks and, practice sessions only, on a batch task
whose simulator runs only in the evaluator (``training.simulator`` "evaluator"):
its agent cannot import the simulator, so it trains here, counted the same way.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ale_robotics.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
)
from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.registry import TRUSTED, Scope
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.sessions.envs import make_envs
from ale_robotics.evaluator.sessions.eval_record import EvalRecords
from ale_robotics.evaluator.sessions.limits import (
    DEFAULT_MAX_SESSIONS_TOTAL,
    SessionCaps,
    check_offered,
    settings_for,
    too_many_sessions,
)
from ale_robotics.evaluator.sessions.types import AUTORESET_MODE, AUTORESET_MODES, SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.evaluator.sessions.watches import SessionWatches, Watch
from ale_robotics.tasks.registry import TrainingBudget
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "ORPHAN_GRACE_S",
    "SessionManager",
    "Watch",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

ORPHAN_GRACE_S = 2.0
"""How long a watched session outlives its broken watch stream: time for a client that lost
its connection (not its process) to reconnect and name it again."""


class SessionManager(SessionWatches):
    """All open sessions of one evaluator, shared by its agent and harness listeners.

    Built from what it uses: ``access`` (whose sessions a caller may see, whether a
    run was closed), ``records`` (an eval session's trusted record), ``training``
    and ``budget`` (a run's practice sessions charge its training budget for the
    task) and ``caps``, the operator's overrides of the session limits.
    """

    def __init__(
        self,
        access: RunAccess,
        records: EvalRecords,
        training: TrainingLedger,
        budget: Callable[[TaskSpec], TrainingBudget | None],
        caps: SessionCaps,
        *,
        reap_interval_s: float = 1.0,
        finish_grace_s: float = 30.0,
        orphan_grace_s: float = ORPHAN_GRACE_S,
    ) -> None:
        self._access = access
        self._records = records
        self._training = training
        self._budget = budget
        self._caps = caps
        self._sessions: dict[str, Session] = {}
        self.orphan_grace_s = orphan_grace_s
        """How long a watched session outlives its broken watch (see :meth:`unwatch`)."""
        self._watcher: dict[str, int] = {}  # session id -> the Watch.id that names it
        self._orphans: dict[str, float] = {}  # session id -> monotonic time it is closed at
        self._opening: dict[str, int] = {}  # per run: slots reserved by opens building envs
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reap_interval_s = reap_interval_s
        self._thread: threading.Thread | None = None
        self.finish_grace_s = finish_grace_s
        """How long :meth:`stop` lets closes in flight complete abandoned episodes."""
        self._abort = threading.Event()  # set by stop(): completions in flight give up
        self._closing = 0  # closes in flight (detached from _sessions, not yet recorded)
        self._closed = threading.Condition(self._lock)
        self._gone: str | None = None  # stop()'s message for calls on closed sessions
        self.on_steps: Callable[[int], None] | None = None  # agent env steps (metrics)

    # ------------------------------------------------------------ lifecycle --

    def start(self) -> None:
        self._thread = threading.Thread(target=self._reap_loop, name="ale-reaper", daemon=True)
        self._thread.start()

    def stop(self, message: str | None = None) -> None:
        """Stop reaping and release every env; every eval session ends recorded.

        ``message``: what a call on a closed session is answered from now on, UNAVAILABLE
        (a draining evaluator's listeners still answer for a moment); None: NOT_FOUND.

        Sessions still open were ended by the evaluator, not abandoned by their
        agent: recorded as infrastructure failures. Closes in flight (an agent's
        CloseSession, a reap) get ``finish_grace_s`` to complete their episodes;
        past it they are aborted, which records an infrastructure failure too.
        """
        self._gone = message
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            ids = list(self._sessions)
        for sid in ids:
            self._close(sid, "the evaluator shut down", infrastructure=True)
        if not self.wait_closed(self.finish_grace_s):
            log.warning("aborting the completion of abandoned episodes: the evaluator stops")
            self._abort.set()
            if not self.wait_closed(30.0):
                log.error("a session close did not end after its abort; its run stays RUNNING")

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until no close is in flight (abandoned episodes completed and recorded)."""
        with self._closed:
            return self._closed.wait_for(lambda: self._closing == 0, timeout)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def watched(self, session_id: str) -> bool:
        """Whether a live WatchSessions stream names this open session."""
        with self._lock:
            return session_id in self._watcher

    def count(self, run_id: str) -> int:
        """Open sessions of one run ("" for run-less practice sessions)."""
        with self._lock:
            return sum(1 for s in self._sessions.values() if s.run_id == run_id)

    def caps(self, task: TaskSpec) -> tuple[int, int]:
        """The limits a run's sessions of ``task`` meet here: (per run, all runs together)."""
        cap = self._caps.max_sessions or settings_for(task).max_sessions
        return cap, self._caps.max_sessions_total or max(DEFAULT_MAX_SESSIONS_TOTAL, cap)

    # ----------------------------------------------------------------- calls --

    def open(
        self,
        task: TaskSpec,
        kind: SessionKind,
        num_envs: int,
        run_id: str,
        render_mode: str | None = None,
        float64_actions: bool = False,
        autoreset_mode: str = AUTORESET_MODE,
    ) -> Session:
        """A new session; ``run_id`` must already be checked (eval sessions are run-bound)."""
        check_offered(task, kind)
        limits = settings_for(task)
        if num_envs < 1:
            raise InvalidArgumentError(f"num_envs must be at least 1, got {num_envs}")
        if autoreset_mode not in AUTORESET_MODES:
            raise InvalidArgumentError(
                f"autoreset_mode {autoreset_mode!r}: one of {list(AUTORESET_MODES)} "
                "(Gymnasium's AutoresetMode values)"
            )
        if num_envs > limits.max_envs_per_session:
            raise ResourceExhaustedError(
                f"num_envs {num_envs} is over the limit session.max_envs_per_session = "
                f"{limits.max_envs_per_session} of task {task.id}"
            )
        if render_mode is not None and render_mode not in rendering.offered_modes(task):
            offered = rendering.offered_modes(task)
            raise FailedPreconditionError(
                f"task {task.id} offers render modes {offered} on this evaluator, not "
                f"{render_mode!r}" + ("" if offered else ": open the session without render_mode")
            )
        if kind is SessionKind.EVAL and num_envs > task.eval.episodes:
            raise InvalidArgumentError(
                f"an eval session of task {task.id} runs {task.eval.episodes} episodes; "
                f"num_envs {num_envs} would leave envs without one"
            )
        self.reap()
        sid = f"sess-{secrets.token_hex(16)}"
        with self._lock:
            self._check_limits(task, run_id)
            # Reserve the slot before the slow part (env creation) so that concurrent
            # opens cannot overshoot the limit.
            self._opening[run_id] = self._opening.get(run_id, 0) + 1
        envs: list[Any] = []
        try:
            # Envs first: the eval job row (the run's one eval session) is created only
            # once nothing else can fail.
            envs = make_envs(task, num_envs, render_mode)
            recorder = None
            meter = None
            if kind is SessionKind.EVAL:
                recorder = self._records.open(task, run_id, sid, num_envs)
            elif run_id:
                meter = self._training.meter(run_id, self._budget(task))
            session = Session(
                sid,
                task,
                kind,
                envs,
                run_id,
                recorder,
                meter,
                render_mode,
                float64_actions,
                autoreset_mode,
                tape=recorder.tape if recorder is not None else None,
            )
        except BaseException:
            for env in envs:
                env.close()
            with self._lock:
                self._release(run_id)
            raise
        with self._lock:
            self._release(run_id)
            # Read under the lock: CloseRun revokes the run before it sweeps its sessions,
            # so a session is either swept or never registered, never left behind.
            alive = not self._access.closed(run_id)
            if alive:
                self._sessions[sid] = session
        if not alive:
            with session.lock:
                session.close("the run was closed", infrastructure=False)
            raise FailedPreconditionError(f"run {run_id!r} was closed (CloseRun)")
        log.info("session %s opened: %s, %s, %d env(s)", sid, task.id, kind.value, num_envs)
        return session

    def call(
        self,
        session_id: str,
        client_timeout_s: float | None,
        fn: Callable[[Session], T],
        scope: Scope = TRUSTED,
    ) -> T:
        """Run ``fn`` on the session, alone, within the per-call deadline."""
        session = self._get(session_id, scope)
        self._access.touch(scope)  # each Step of a stream or the data plane is a call too
        if session_id in self._orphans:  # its client is evidently alive: not an orphan
            with self._lock:
                self._orphans.pop(session_id, None)
        deadline = settings_for(session.task).call_deadline_s
        if client_timeout_s is not None:
            deadline = min(deadline, max(client_timeout_s, 0.0))
        if not session.lock.acquire(timeout=deadline):
            raise DeadlineExceededError(
                f"session {session_id} stayed busy with another call past the per-call deadline "
                f"({deadline:g}s); calls on one session run one at a time"
            )
        steps = session.env_steps
        try:
            if session.closed:
                closed = NotFoundError(f"session {session_id} was closed")
                raise UnavailableError(self._gone) if self._gone else closed
            session.last_used = time.monotonic()
            return fn(session)
        finally:
            session.last_used = time.monotonic()
            steps, report = session.env_steps - steps, self.on_steps
            session.lock.release()
            if steps and report is not None:
                report(steps)

    def close(
        self, session_id: str, scope: Scope = TRUSTED, why: str = "closed by the client"
    ) -> int:
        """Close one session; returns the episodes it completed (eval sessions)."""
        self._get(session_id, scope)
        return self._close(session_id, why)

    def close_run(self, run_id: str, why: str) -> int:
        """Close every session of a run (the harness, once the agent has exited)."""
        with self._lock:
            ids = [s.id for s in self._sessions.values() if s.run_id == run_id]
        for sid in ids:
            self._close(sid, why)
        return len(ids)

    def reap(self) -> list[str]:
        """Close sessions idle past their task's ``idle_timeout_s``, and orphans whose
        grace is over (:meth:`unwatch`); returns their ids.

        They leave the table at once (their ids are NOT_FOUND from now on and their
        slots free); each is closed on a thread of its own, since an eval one
        simulates the episodes its agent left (:meth:`wait_closed` waits for them).
        """
        now = time.monotonic()
        reaped: list[tuple[Session, str]] = []
        with self._lock:
            for s in self._sessions.values():
                if s.lock.locked():
                    continue  # a call in flight: looked at again next time
                timeout = settings_for(s.task).idle_timeout_s
                if now - s.last_used > timeout:
                    reaped.append((s, f"idle for over {timeout:g}s"))
                elif self._orphans.get(s.id, now + 1) <= now:
                    reaped.append(
                        (s, "its client went away (its watch stream or data plane ended)")
                    )
            for s, _ in reaped:
                del self._sessions[s.id]
                self._forget(s.id)
                self._closing += 1
        for s, why in reaped:
            log.info("session %s %s: closing it", s.id, why)
            threading.Thread(
                target=self._finish,
                args=(s, why, False),
                name=f"ale-close-{s.id[:13]}",
                daemon=True,
            ).start()
        return [s.id for s, _ in reaped]

    # --------------------------------------------------------------- private --

    def _check_limits(self, task: TaskSpec, run_id: str) -> None:
        """Refuse a session over the run's limit or the evaluator-wide one (lock held)."""
        limits = settings_for(task)
        cap, total_cap = self.caps(task)
        mine = [s for s in self._sessions.values() if s.run_id == run_id]
        count = len(mine) + self._opening.get(run_id, 0)
        if count >= cap:
            where = (
                "the evaluator's --max-sessions"
                if self._caps.max_sessions
                else "the limit session.max_sessions"
            )
            raise too_many_sessions(
                run_id, mine, count, cap, where, limits.idle_timeout_s, set(self._watcher)
            )
        total = len(self._sessions) + sum(self._opening.values())
        if total >= total_cap:
            # Other runs' sessions are not named: their ids are theirs.
            raise ResourceExhaustedError(
                f"the evaluator-wide limit --max-sessions-total = {total_cap} (all runs "
                f"together) is reached; this run has {len(mine)} open. Retry once other "
                "sessions close"
            )

    def _release(self, run_id: str) -> None:
        n = self._opening.get(run_id, 0) - 1
        if n > 0:
            self._opening[run_id] = n
        else:
            self._opening.pop(run_id, None)

    def _get(self, session_id: str, scope: Scope = TRUSTED) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is not None and not self._access.visible(scope, session.run_id):
            session = None  # another run's: answered exactly as an id that never existed
        if session is None and self._gone is not None:
            raise UnavailableError(self._gone)
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
            self._forget(session_id)
            self._closing += 1
        return self._finish(session, why, infrastructure)

    def _forget(self, session_id: str) -> None:
        """Drop a session's watch bookkeeping (lock held; it has left the table)."""
        self._watcher.pop(session_id, None)
        self._orphans.pop(session_id, None)

    def _finish(self, session: Session, why: str, infrastructure: bool) -> int:
        """Close a session already out of the table (counted in ``_closing``)."""
        try:
            # Wait for a call in flight (bounded: one call's work is bounded), then
            # complete and record; only this session's lock is held meanwhile.
            with session.lock:
                return session.close(why, infrastructure=infrastructure, abort=self._abort)
        finally:
            with self._closed:
                self._closing -= 1
                self._closed.notify_all()

    def _reap_loop(self) -> None:
        while not self._stop.wait(self._reap_interval_s):
            try:
                self.reap()
            except Exception:  # keep reaping; a failure here is logged, never silent
                log.exception("reaping idle sessions failed")
