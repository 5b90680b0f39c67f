"""The limits of interactive sessions: which kinds a task offers, how many a run and the
evaluator may hold, and the refusals that name the limit hit.

Split from :mod:`.manager`, which enforces them at each OpenSession (its docstring lists
them and their status codes), so that the limits read in one place.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Protocol

from ale_robotics.errors import FailedPreconditionError, ResourceExhaustedError
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.tasks.spec import SessionSettings, TaskSpec

__all__ = [
    "DEFAULT_MAX_SESSIONS_TOTAL",
    "SessionCaps",
    "check_offered",
    "settings_for",
    "too_many_sessions",
]

_DEFAULT_SETTINGS = SessionSettings()

DEFAULT_MAX_SESSIONS_TOTAL = 64
"""Sessions of all runs together unless the operator says otherwise (--max-sessions-total)."""


class SessionCaps(Protocol):
    """The operator's overrides of the session limits (an :class:`~.config.EvaluatorConfig`),
    read at every open so that a change applies to the next one."""

    @property
    def max_sessions(self) -> int | None:
        """Concurrent sessions per run (``--max-sessions``); None: the task's."""

    @property
    def max_sessions_total(self) -> int | None:
        """Sessions of all runs together (``--max-sessions-total``); None: the default."""


def settings_for(task: TaskSpec) -> SessionSettings:
    """The task's session limits (defaults for a task that declares none)."""
    return task.session if task.session is not None else _DEFAULT_SETTINGS


def check_offered(task: TaskSpec, kind: SessionKind) -> None:
    """Refuse a session of a kind the task does not offer (FAILED_PRECONDITION).

    An interactive task offers eval sessions, and practice ones unless its config
    forbids them. A batch task whose simulator runs only in the evaluator
    (``training.simulator`` "evaluator") offers practice sessions, its agent's only
    way to train, but never an eval session: it is evaluated on its submission, and
    an eval session would be a second, unscored way to run the hidden-seed episodes.
    """
    if not task.offers_eval_sessions and not task.offers_practice_sessions:
        raise FailedPreconditionError(
            f"task {task.id} is a {task.mode.value} task, not interactive: it offers no "
            "sessions (see GetSpec.mode and the submission contract)"
        )
    if kind is SessionKind.EVAL and not task.offers_eval_sessions:
        raise FailedPreconditionError(
            f"task {task.id} is a {task.mode.value} task, not interactive: it offers "
            "practice sessions only (its simulator runs only in the evaluator, so its "
            "agent trains in them), never an eval session: it is evaluated on its "
            "submission (SubmitBatchEval)"
        )
    if kind is SessionKind.PRACTICE and not task.offers_practice_sessions:
        raise FailedPreconditionError(f"task {task.id} allows no practice sessions")


def too_many_sessions(
    run_id: str,
    mine: Sequence[Session],
    count: int,
    cap: int,
    where: str,
    idle_timeout_s: float,
    watched: Collection[str],
) -> ResourceExhaustedError:
    """The refusal of a session over the run's limit: the run's open sessions named (the
    first 16: kind, envs, idle time, whether watched) and what to do about them."""
    who = f"run {run_id!r}" if run_id else "no run (practice sessions of the shared token)"
    now = time.monotonic()
    shown = ", ".join(
        f"{s.id} ({s.kind.value}, {s.num_envs} env(s), idle {now - s.last_used:.0f}s"
        f"{'' if s.id in watched else ', unwatched'})"
        for s in mine[:16]
    )
    if len(mine) > 16:
        shown += f", and {len(mine) - 16} more"
    return ResourceExhaustedError(
        f"{count} sessions of {who} are open, {where} = {cap} per run "
        f"(open: {shown or 'none yet, others are opening'}): close the envs you no "
        f"longer use (env.close(), or CloseSession); sessions of a client that "
        f"exited close within seconds if it watched them (the Python SDK does), "
        f"others once idle for session.idle_timeout_s = {idle_timeout_s:g}s"
    )
