"""Answer INVALID_ARGUMENT, not INTERNAL, for requests that are not valid protobuf.

grpc-python deserializes a request before any servicer code runs, and when that
fails (bytes that are not a message, a string field that is not UTF-8) it answers
``INTERNAL: Exception deserializing request!`` and logs a traceback. To a client
that reads as an evaluator bug, and a fuzzer cannot tell it from one. This
interceptor wraps each unary handler's deserializer so a malformed request
reaches a small handler that aborts with INVALID_ARGUMENT and the parser's
one-line reason (which names the message type and the defect, never the bytes).

Install it after :class:`~ale_robotics.evaluator.service.AuthInterceptor`, so an
unauthenticated caller still gets UNAUTHENTICATED whatever it sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

__all__ = ["RequestGuardInterceptor"]

if TYPE_CHECKING:  # grpc-stubs make it generic; the runtime class is not subscriptable
    _InterceptorBase = grpc.ServerInterceptor[Any, Any]
else:
    _InterceptorBase = grpc.ServerInterceptor


class _Malformed:
    """Stands in for a request that could not be parsed."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:200]


class RequestGuardInterceptor(_InterceptorBase):
    """Turns undecodable unary requests into INVALID_ARGUMENT with a reason."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or handler.request_deserializer is None:
            return handler  # streaming (health Watch, reflection) and raw handlers: as they are
        parse = handler.request_deserializer
        behavior = handler.unary_unary
        method = handler_call_details.method or "this method"

        def lenient(data: bytes) -> Any:
            try:
                return parse(data)
            except Exception as exc:
                return _Malformed(_reason(exc))

        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, _Malformed):
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{method}: the request is not a valid protobuf message ({request.reason})",
                )
            return behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=lenient,
            response_serializer=handler.response_serializer,
        )
