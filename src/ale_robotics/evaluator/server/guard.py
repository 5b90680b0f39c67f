"""Answer INVALID_ARGUMENT, not INTERNAL, for requests that are not valid protobuf.

grpc-python deserializes a request before any servicer code runs, and when that
fails (bytes that are not a message, a string field that is not UTF-8) it answers
``INTERNAL: Exception deserializing request!`` and logs a traceback. To a client
that reads as an evaluator bug, and a fuzzer cannot tell it from one. This
interceptor wraps the deserializer of each unary and bidi-streaming handler so a
malformed request reaches code that aborts with INVALID_ARGUMENT and the
parser's one-line reason (which names the message type and the defect, never
the bytes); on a stream, the messages before it are answered as usual.

Install it after :class:`~ale_robotics.evaluator.server.auth.AuthInterceptor`, so an
unauthenticated caller still gets UNAUTHENTICATED whatever it sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
    """Turns undecodable requests (unary or on a stream) into INVALID_ARGUMENT with a reason."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler  # raw handlers: as they are
        if handler.unary_unary is None and handler.stream_stream is None:
            return handler  # server streaming (health Watch): one request, parsed as is
        parse = handler.request_deserializer
        method = handler_call_details.method or "this method"

        def lenient(data: bytes) -> Any:
            try:
                return parse(data)
            except Exception as exc:
                return _Malformed(_reason(exc))

        def refuse(request: _Malformed, context: grpc.ServicerContext) -> None:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{method}: the request is not a valid protobuf message ({request.reason})",
            )

        if handler.unary_unary is not None:
            behavior = handler.unary_unary

            def guarded(request: Any, context: grpc.ServicerContext) -> Any:
                if isinstance(request, _Malformed):
                    refuse(request, context)
                return behavior(request, context)

            return grpc.unary_unary_rpc_method_handler(
                guarded,
                request_deserializer=lenient,
                response_serializer=handler.response_serializer,
            )

        stream = handler.stream_stream
        assert stream is not None

        def checked(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            for request in requests:
                if isinstance(request, _Malformed):
                    refuse(request, context)
                yield request

        def guarded_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            return stream(checked(requests, context), context)

        return grpc.stream_stream_rpc_method_handler(
            guarded_stream,
            request_deserializer=lenient,
            response_serializer=handler.response_serializer,
        )
