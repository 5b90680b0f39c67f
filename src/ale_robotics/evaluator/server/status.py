"""The one place where an evaluator error becomes a gRPC status.

Every servicer method runs through :func:`rpc`: an :class:`~ale_robotics.errors.AleError`
becomes its own status code and message (the hierarchy in :mod:`ale_robotics.errors`
maps each to one); anything else is a bug, logged with its traceback and answered
INTERNAL without details, so that nothing internal leaks to a caller.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from ale_robotics.errors import AleError

__all__ = ["answer", "failing_handler", "rpc"]

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def answer(fn: Callable[[], Resp], context: grpc.ServicerContext, name: str) -> Resp:
    """Run one request's work; an AleError becomes its status, anything else INTERNAL."""
    try:
        return fn()
    except AleError as exc:
        context.abort(exc.code, exc.message)
        raise  # unreachable: abort raises
    except Exception:
        log.exception("bug in %s", name)
        context.abort(grpc.StatusCode.INTERNAL, "internal evaluator error (logged)")
        raise


def rpc(fn: Callable[[Any, Req, grpc.ServicerContext], Resp]) -> Callable[..., Resp]:
    """A servicer method whose errors become gRPC statuses (see the module's docstring)."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Req, context: grpc.ServicerContext) -> Resp:
        return answer(lambda: fn(self, request, context), context, fn.__name__)

    return wrapper


def failing_handler(exc: AleError) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler answering ``exc``'s status, for an interceptor whose own work failed
    before any servicer ran (the token lookup, when the job store cannot be reached:
    UNAVAILABLE, which a client retries, never an "Error in service handler")."""

    def fail(_: Any, context: grpc.ServicerContext) -> None:
        context.abort(exc.code, exc.message)

    return grpc.unary_unary_rpc_method_handler(fail)
