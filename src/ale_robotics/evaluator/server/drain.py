"""Draining an evaluator before it stops: finish what runs here, hand the rest to others.

What ``evaluator serve`` does on its first SIGTERM or SIGINT
(:meth:`.listeners.RunningEvaluator.drain`), in order:

1. Health answers NOT_SERVING (load balancers stop sending) and the job runner claims
   no more jobs: the other replicas on a shared store take the queue.
2. Work that would bind itself to this process is refused with UNAVAILABLE and
   :data:`DRAINING`: OpenSession and OpenRun. A submission (SubmitBatchEval,
   SubmitCheckpoint) is still taken: it is snapshotted and queued in the store, where
   another replica (or this evaluator, restarted) runs it; nothing of it stays in this
   process. Every other call (status, results, calls on open sessions, CloseRun) is
   answered as usual.
3. The job under way, if any, gets until the deadline (``--drain-s``) to finish. One
   still running then is stopped and requeued at once (:meth:`.store.JobQueue.requeue`,
   its attempt counted as after any infrastructure failure), so that another replica
   need not wait out its lease.
4. The interactive sessions still open are closed (an eval session ends recorded as an
   infrastructure failure, as on any stop). From then on every AleEnv call is answered
   UNAVAILABLE with :data:`SHUTTING_DOWN`, for :data:`LINGER_S` when sessions were open,
   so that their agents read why; then the caller stops the listeners.

A second signal cuts this short: the caller stops at once, as an evaluator without a
drain does (the job under way is left RUNNING for its lease to run out).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from ale_robotics.evaluator.store import StoreUnavailable
from ale_robotics.v1 import ale_env_pb2 as pb

if TYPE_CHECKING:
    from ale_robotics.evaluator.core import Evaluator

    _InterceptorBase = grpc.ServerInterceptor[Any, Any]
else:
    _InterceptorBase = grpc.ServerInterceptor

__all__ = ["DRAINING", "LINGER_S", "SHUTTING_DOWN", "DrainGate", "DrainReport", "drain"]

DRAINING = (
    "the evaluator is draining (shutting down): it takes no new sessions or runs; retry "
    "on another evaluator replica, or on this one once it has restarted"
)
SHUTTING_DOWN = (
    "the evaluator is shutting down and closed this session; open a new session on another "
    "evaluator replica, or on this one once it has restarted"
)
LINGER_S = 2.0
"""How long the listeners answer :data:`SHUTTING_DOWN` after sessions were closed."""
REQUEUED = "requeued: the evaluator running it was drained and stopped at its --drain-s deadline"

_SERVICE = "/" + pb.DESCRIPTOR.services_by_name["AleEnv"].full_name + "/"
_REFUSED_WHILE_DRAINING = frozenset({_SERVICE + "OpenSession", _SERVICE + "OpenRun"})


class Phase(enum.Enum):
    SERVING = "serving"
    DRAINING = "draining"
    CLOSED = "closed"


class DrainGate(_InterceptorBase):
    """Refuses, with UNAVAILABLE and a message, the calls the drain's phase forbids.

    Installed first on both listeners, so a refused call costs nothing else.
    """

    def __init__(self) -> None:
        self.phase = Phase.SERVING

    def refusal(self, method: str) -> str | None:
        """The message a call of ``method`` is refused with now; None: served."""
        if self.phase is Phase.DRAINING and method in _REFUSED_WHILE_DRAINING:
            return DRAINING
        if self.phase is Phase.CLOSED and method.startswith(_SERVICE):
            return SHUTTING_DOWN
        return None

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        message = self.refusal(handler_call_details.method or "")
        if handler is None or message is None:
            return handler
        return _refusing(handler, message)


def _refusing(
    handler: grpc.RpcMethodHandler[Any, Any], message: str
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of ``handler``'s kind that answers UNAVAILABLE with ``message``."""

    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAVAILABLE, message)

    parse, write = handler.request_deserializer, handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(refuse, parse, write)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse, parse, write)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(refuse, parse, write)
    return grpc.stream_stream_rpc_method_handler(refuse, parse, write)


@dataclass
class DrainReport:
    """What a drain did, for the operator."""

    finished: dict[str, str] = field(default_factory=dict)
    """Jobs that finished during the drain: job id -> state."""
    requeued: list[str] = field(default_factory=list)
    """Jobs stopped at the deadline and put back in the queue."""
    sessions_closed: int = 0
    interrupted: bool = False
    """A second signal cut the drain short (the caller stops at once)."""


def drain(
    evaluator: Evaluator,
    gate: DrainGate,
    not_serving: Callable[[], None],
    deadline_s: float,
    *,
    interrupt: threading.Event,
    say: Callable[[str], None],
) -> DrainReport:
    """Drain ``evaluator`` (see the module docstring); returns once the listeners may stop.

    ``interrupt``: set (a second signal) to return at once, ``interrupted``.
    """
    report = DrainReport()
    deadline = time.monotonic() + deadline_s
    gate.phase = Phase.DRAINING
    not_serving()
    runner = evaluator.runner
    runner.drain()
    job = runner.current_job()
    say(
        "draining: claiming no more jobs; OpenSession and OpenRun refused (UNAVAILABLE); "
        + (f"job {job} running, up to {deadline_s:g}s to finish" if job else "no job running")
        + " (a second signal stops at once)"
    )
    while runner.current_job() is not None and time.monotonic() < deadline:
        if interrupt.wait(0.1):
            report.interrupted = True
            return report
    if job is not None:
        _settle(evaluator, job, report, say)
    gate.phase = Phase.CLOSED
    report.sessions_closed = len(evaluator.sessions)
    evaluator.sessions.stop(SHUTTING_DOWN)
    if report.sessions_closed:
        say(f"drain: closed {report.sessions_closed} interactive session(s)")
        interrupt.wait(LINGER_S)
    return report


def _settle(
    evaluator: Evaluator, job: str, report: DrainReport, say: Callable[[str], None]
) -> None:
    """The job that ran when the drain began: finished, or stopped now and requeued."""
    try:
        if evaluator.runner.abandon(job) and evaluator.store.requeue(job, REQUEUED):
            report.requeued.append(job)
            say(f"drain: job {job} still running at the deadline: requeued for another evaluator")
            return
        record = evaluator.store.get(job)
    except StoreUnavailable as exc:
        say(f"drain: job {job} left to its lease (the job store failed: {exc})")
        return
    state = record.state.value if record is not None else "gone"
    report.finished[job] = state
    say(f"drain: job {job} ended {state}")
