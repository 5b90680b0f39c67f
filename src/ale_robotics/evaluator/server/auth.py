"""Who a call to an evaluator listener is: its bearer token, checked before any servicer code.

Split from :mod:`.servicer` so that the listeners (:mod:`.listeners`) build the interceptor
and the servicer asks it again per call, with the token rules in one module: the listener's
own token, an open run's token (looked up by its SHA-256), the operator's practice token.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import grpc

from ale_robotics.errors import AleError
from ale_robotics.evaluator.config import EvaluatorConfig
from ale_robotics.evaluator.runs.registry import (
    TRUSTED,
    Access,
    Scope,
)
from ale_robotics.evaluator.server.status import failing_handler

__all__ = ["AuthInterceptor", "Role", "listener_scope"]

if TYPE_CHECKING:  # grpc-stubs make it generic; the runtime class is not subscriptable
    _InterceptorBase = grpc.ServerInterceptor[Any, Any]
else:
    _InterceptorBase = grpc.ServerInterceptor

_UNAUTHENTICATED_OK = ("/grpc.health.v1.Health/", "/grpc.reflection.")
_PRACTICE = Scope(Access.PRACTICE)


class Role(StrEnum):
    AGENT = "agent"
    HARNESS = "harness"


def listener_scope(config: EvaluatorConfig, role: Role) -> Scope:
    """What the listener's own token (the state dir's ``<role>.token``) may touch."""
    if role is Role.HARNESS:
        return TRUSTED
    if config.run_id is not None:
        return Scope(Access.RUN, config.run_id)
    return Scope(Access.NO_RUN) if config.per_run_tokens else Scope(Access.ANY_RUN)


class AuthInterceptor(_InterceptorBase):
    """Refuses any AleEnv call without ``authorization: Bearer <token>`` this listener accepts.

    That is the listener's own token, or on the agent listener of a shared evaluator
    an open run's token (``run_tokens``, looked up by its SHA-256) or the operator's
    practice token (``practice_token``, :attr:`.runs.registry.Access.PRACTICE`). :meth:`scope`
    says what a call's token may touch; the servicer asks it again for every call, so a
    token revoked by CloseRun stops working at once (``closed``: whether the run a
    listener token is bound to was closed, on an evaluator bound to one run).
    ``on_call`` is told the scope of each call let in (the run's agent activity).
    """

    def __init__(
        self,
        token: str,
        *,
        scope: Scope = TRUSTED,
        run_tokens: Callable[[bytes], Scope | None] | None = None,
        practice_token: str | None = None,
        closed: Callable[[str], bool] | None = None,
        on_call: Callable[[Scope], None] | None = None,
    ) -> None:
        self._expected = f"Bearer {token}".encode()
        self._scope = scope
        self._run_tokens = run_tokens
        self._practice = f"Bearer {practice_token}".encode() if practice_token else None
        self._closed = closed
        self._on_call = on_call

        def deny(_: Any, context: grpc.ServicerContext) -> None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or wrong token: send metadata 'authorization: Bearer <token>' with "
                "the token of the listener you connect to (ALE_TOKEN for agents)",
            )

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method or ""
        if method.startswith(_UNAUTHENTICATED_OK):
            return continuation(handler_call_details)
        try:
            scope = self.scope(handler_call_details.invocation_metadata)
        except AleError as exc:  # a run token looked up in a store that cannot be reached
            return failing_handler(exc)
        if scope is None:
            return self._deny
        if self._on_call is not None:
            self._on_call(scope)
        return continuation(handler_call_details)

    def scope(self, metadata: Any) -> Scope | None:
        """The scope of a call's ``authorization`` metadata; None when no token matches."""
        given = b""
        for key, value in metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
        if hmac.compare_digest(given, self._expected):
            if self._scope.bound and self._closed is not None and self._closed(self._scope.run_id):
                return None  # the bound run was closed: its token died with it
            return self._scope
        if self._practice is not None and hmac.compare_digest(given, self._practice):
            return _PRACTICE
        if self._run_tokens is not None and given.startswith(b"Bearer "):
            return self._run_tokens(given[len(b"Bearer ") :])
        return None
