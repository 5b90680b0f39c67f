"""The gateway's side toward the operator's upstream: what goes there, and what comes back.

A request goes with the operator's key where its protocol reads it, the agent's headers on
:data:`PASSED_REQUEST_HEADERS` only (none that carries a credential), the query parameters
on :data:`PASSED_QUERY` only, ``Accept-Encoding: identity``, and no redirect followed (a
3xx is a 502 to the agent, and its target gets nothing). The answer comes back decoded
(:mod:`.encoding`), server-sent events streamed through as they arrive, and its usage read
(:mod:`.protocols`). Apart from :mod:`.server`, which decides whether a call goes at all.
"""

from __future__ import annotations

import logging
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from ale_robotics.gateway.call import GatewayCall, write_chunk
from ale_robotics.gateway.encoding import DecodeError, Decoder, decoder_for
from ale_robotics.gateway.protocols import Protocol, SseUsage, error_body, usage_from_body

__all__ = [
    "NO_RETRY",
    "PASSED_QUERY",
    "PASSED_REQUEST_HEADERS",
    "Upstream",
    "agent_headers",
    "error_response",
    "upstream_base",
]

logger = logging.getLogger(__name__)

PASSED_QUERY: Final = {"beta": frozenset({"true"})}
"""Query parameters passed upstream, with their allowed values (the Anthropic SDK's beta
namespace posts to ``/v1/messages?beta=true``); every other one is dropped."""
PASSED_REQUEST_HEADERS: Final = frozenset(
    {
        "accept",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "anthropic-dangerous-direct-browser-access",
        "openai-beta",
        "x-app",
        "x-claude-code-session-id",
        "session_id",
        "session-id",
        "thread-id",
        "conversation_id",
        "originator",
        "version",
        "x-client-request-id",
        "idempotency-key",
    }
)
"""Request headers of the agent passed upstream (providers use them for sessions,
caching and their statistics), with every ``x-stainless-*`` (the official SDKs'
description of themselves) and ``x-codex-*`` (Codex's window, turn and feature ids).
None carries a credential: the operator's key is the gateway's to add, and no other
header of the agent's goes upstream."""
_PASSED_HEADER_PREFIXES: Final = ("x-stainless-", "x-codex-")
_PASSED_RESPONSE_HEADERS: Final = (
    "content-type",
    "retry-after",
    "x-should-retry",
    "request-id",
    "x-request-id",
)
NO_RETRY: Final = {"x-should-retry": "false"}
_DEFAULT_ANTHROPIC_VERSION: Final = "2023-06-01"


def upstream_base(url: str) -> str:
    """The upstream's base URL, to which ``/v1/...`` paths are appended: ``url`` without a
    trailing ``/`` or ``/v1`` (both ``https://host`` and ``https://host/v1`` are taken)."""
    base = url.strip().rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    if not base.startswith(("http://", "https://")):
        from ale_robotics.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"--model-upstream {url!r}: an http:// or https:// URL (e.g. https://api.openai.com/v1)"
        )
    return base


def _passed(name: str) -> bool:
    return name in PASSED_REQUEST_HEADERS or name.startswith(_PASSED_HEADER_PREFIXES)


def agent_headers(request: web.Request) -> dict[str, str]:
    """The agent's headers, names lower-cased, the values of a repeated one joined: a
    header sent twice is checked and forwarded whole, not one value of it."""
    joined: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        joined.setdefault(name.lower(), []).append(value)
    return {name: ", ".join(values) for name, values in joined.items()}


def _query(query_string: str) -> str:
    """The agent's query string with only the :data:`PASSED_QUERY` parameters kept."""
    kept = [
        (k, v)
        for k, v in parse_qsl(query_string, keep_blank_values=True)
        if v in PASSED_QUERY.get(k, ())
    ]
    return "?" + urlencode(kept) if kept else ""


def error_response(
    protocol: Protocol, status: int, message: str, code: str, *, retry: bool = False
) -> web.Response:
    """A refusal in ``protocol``'s error shape; ``retry``: the SDKs may try again later."""
    headers = {"x-should-retry": "true", "retry-after": "1"} if retry else NO_RETRY
    return web.Response(
        status=status,
        body=error_body(protocol, status, message, code),
        content_type="application/json",
        headers=headers,
    )


class Upstream:
    """The operator's upstream at ``base`` (:func:`upstream_base`) with its ``key``."""

    def __init__(self, base: str, key: str | None, timeout: ClientTimeout) -> None:
        self.base = base
        self._key = key
        self._timeout = timeout
        self._session: ClientSession | None = None

    async def start(self) -> None:
        """Open the HTTP client (in the gateway's event loop). It asks for identity and
        decodes an upstream that compresses anyway itself (:mod:`.encoding`)."""
        self._session = ClientSession(timeout=self._timeout, auto_decompress=False)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _headers(self, request: web.Request, protocol: Protocol) -> dict[str, str]:
        headers = {k: v for k, v in agent_headers(request).items() if _passed(k)}
        headers["content-type"] = "application/json"
        headers["accept-encoding"] = "identity"
        if protocol == "anthropic":
            headers.setdefault("anthropic-version", _DEFAULT_ANTHROPIC_VERSION)
            if self._key:
                headers["x-api-key"] = self._key
        elif self._key:
            headers["authorization"] = f"Bearer {self._key}"
        return headers

    @staticmethod
    def _failed(call: GatewayCall, message: str) -> web.Response:
        return call.refuse(
            error_response(call.protocol, 502, message, "upstream_error"), "upstream"
        )

    async def forward(
        self, request: web.Request, call: GatewayCall, data: bytes
    ) -> web.StreamResponse:
        assert self._session is not None, "start() the upstream client first"
        url = self.base + call.endpoint + _query(request.query_string)
        try:
            upstream = await self._session.post(
                url,
                data=data,
                headers=self._headers(request, call.protocol),
                allow_redirects=False,
            )
        except (ClientError, TimeoutError, OSError) as exc:
            return self._failed(
                call, f"the model upstream could not be reached ({type(exc).__name__})"
            )
        async with upstream:
            if 300 <= upstream.status < 400:
                return self._failed(
                    call,
                    f"the model upstream answered {upstream.status} (a redirect), which the "
                    "gateway does not follow: the operator must give --model-upstream the "
                    "final URL",
                )
            call.reached = True  # it answered: whatever it did for the call is counted
            try:
                decoder = decoder_for(upstream.headers.get("content-encoding", ""))
            except DecodeError as exc:
                return self._failed(
                    call,
                    f"the model upstream answered in {exc}, which the gateway cannot decode "
                    "(it asks for identity)",
                )
            headers = {
                k: v for k in _PASSED_RESPONSE_HEADERS if (v := upstream.headers.get(k)) is not None
            }
            call.status = upstream.status
            try:
                if upstream.headers.get("content-type", "").startswith("text/event-stream"):
                    call.stream = True
                    return await self._stream(request, call, upstream.content, headers, decoder)
                body = await upstream.read()
                if decoder is not None:
                    call.response = body  # what it sent, if it does not decode
                    body = decoder.feed(body) + decoder.end()
            except (ClientError, TimeoutError, OSError) as exc:
                return self._failed(
                    call, f"the model upstream's answer broke off ({type(exc).__name__})"
                )
            except DecodeError as exc:
                return self._failed(call, f"the model upstream answered a {exc}")
            call.response = body
            call.count = usage_from_body(call.protocol, body, call.endpoint)
            return web.Response(status=upstream.status, body=body, headers=headers)

    async def _stream(
        self,
        request: web.Request,
        call: GatewayCall,
        content: Any,
        headers: dict[str, str],
        decoder: Decoder | None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=call.status, headers=headers)
        sse = SseUsage(call.protocol)
        chunks: list[bytes] = []
        await response.prepare(request)
        client_gone = False
        try:
            async for raw in content.iter_any():
                chunk = raw if decoder is None else decoder.feed(raw)
                if not chunk:
                    continue
                # Each chunk is passed on when the next one arrives: the last one (the end
                # of the stream, which an SDK stops reading at) only once the call is
                # recorded.
                if chunks and not client_gone:
                    client_gone = not await write_chunk(response, chunks[-1])
                chunks.append(chunk)
                sse.feed(chunk)
            if decoder is not None and (tail := decoder.end()):
                chunks.append(tail)
                sse.feed(tail)
        except (ClientError, TimeoutError, OSError, DecodeError) as exc:
            logger.info(
                "the model upstream's stream broke off (%s) after %d chunks", exc, len(chunks)
            )
        sse.close()
        call.response = b"".join(chunks)
        call.count = sse.count
        if not client_gone:
            call.open_stream = response
            call.held = chunks[-1] if chunks else b""
        return response
