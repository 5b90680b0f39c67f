"""What the gateway reads from and writes in the two provider protocols.

The gateway forwards bodies unchanged (but for one field, below) and reads only what its
policy needs: the model a request names, whether it streams, and the token counts the
upstream reports. These are read leniently from plain JSON, so that an upstream that adds
fields (every provider does, often) or an OpenAI-compatible server that omits some still
works; the agents' side uses the official SDKs unchanged.

=========== ======================================= ===========================================
protocol    usage, one response                      usage, streamed (server-sent events)
=========== ======================================= ===========================================
openai      ``usage.prompt_tokens`` /                a last chunk with ``usage``, sent when the
(chat,      ``completion_tokens`` (chat, legacy      request has ``stream_options.include_usage``
completions, completions, embeddings);               (the gateway sets it on every streamed chat
responses)  ``usage.input_tokens`` /                 or completions request); responses:
            ``output_tokens`` (responses)            ``response.completed``'s ``response.usage``
anthropic   ``usage.input_tokens`` (+ cache          ``message_start``'s ``message.usage``, then
(messages)  creation and cache read) /               ``message_delta``'s ``usage`` (cumulative)
            ``output_tokens``
=========== ======================================= ===========================================

Errors the gateway makes itself are in each protocol's error shape, so that the SDKs raise
their usual exception with the message (``openai.RateLimitError``,
``anthropic.PermissionDeniedError``, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "Protocol",
    "SseUsage",
    "TokenCount",
    "error_body",
    "prepare_request",
    "usage_from_body",
]

Protocol = Literal["openai", "anthropic"]

_OPENAI_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    429: "insufficient_quota",
    502: "upstream_error",
}
_ANTHROPIC_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    502: "api_error",
}


@dataclass(frozen=True)
class TokenCount:
    """Tokens of one call, as the upstream reported them."""

    tokens_in: int
    tokens_out: int


def error_body(protocol: Protocol, status: int, message: str, code: str) -> bytes:
    """The JSON error a provider of ``protocol`` answers with ``status``."""
    doc: dict[str, Any]
    if protocol == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        doc = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = _OPENAI_ERROR_TYPES.get(status, "server_error")
        doc = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json.dumps(doc).encode("utf-8")


def prepare_request(endpoint: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """``body`` with what the gateway must add, or None when it is forwarded as it came.

    One change: a streamed OpenAI chat or completions request gets
    ``stream_options.include_usage = true``, without which the stream carries no usage
    and the call could not be counted. It adds one last chunk (``choices`` empty) that the
    official SDKs expect.
    """
    if (
        endpoint not in ("/v1/chat/completions", "/v1/completions")
        or body.get("stream") is not True
    ):
        return None
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return None
    new_options = dict(options) if isinstance(options, dict) else {}
    new_options["include_usage"] = True
    return {**body, "stream_options": new_options}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _from_usage(protocol: Protocol, usage: object) -> TokenCount | None:
    if not isinstance(usage, dict):
        return None
    if protocol == "anthropic":
        tokens_in = (
            _int(usage.get("input_tokens"))
            + _int(usage.get("cache_creation_input_tokens"))
            + _int(usage.get("cache_read_input_tokens"))
        )
        return TokenCount(tokens_in, _int(usage.get("output_tokens")))
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return TokenCount(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
    if "input_tokens" in usage or "output_tokens" in usage:  # the Responses API
        return TokenCount(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))
    return None


def usage_from_body(protocol: Protocol, body: bytes) -> TokenCount | None:
    """The token counts of a (not streamed) JSON response; None when it reports none."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    return _from_usage(protocol, doc.get("usage"))


class SseUsage:
    """Reads the usage out of a server-sent event stream as its bytes go by.

    :meth:`feed` takes the bytes as they arrive (split anywhere); :attr:`count` is the
    last usage seen (streams report it once, or cumulatively), None while none was.
    """

    def __init__(self, protocol: Protocol) -> None:
        self.protocol: Protocol = protocol
        self._buffer = b""
        self._in = 0
        self._out = 0
        self.seen = False

    @property
    def count(self) -> TokenCount | None:
        return TokenCount(self._in, self._out) if self.seen else None

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def close(self) -> None:
        """Read a last line the stream did not end with a newline."""
        if self._buffer:
            self._line(self._buffer.rstrip(b"\r"))
            self._buffer = b""

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data.startswith(b"{"):  # [DONE], or nothing
            return
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return
        if isinstance(doc, dict):
            self._event(doc)

    def _event(self, doc: dict[str, Any]) -> None:
        if self.protocol == "anthropic":
            kind = doc.get("type")
            if kind == "message_start" and isinstance(doc.get("message"), dict):
                self._take(doc["message"].get("usage"), cumulative=False)
            elif kind == "message_delta":
                self._take(doc.get("usage"), cumulative=True)
            return
        if doc.get("type") == "response.completed" and isinstance(doc.get("response"), dict):
            self._take(doc["response"].get("usage"), cumulative=False)
        elif doc.get("usage") is not None:
            self._take(doc.get("usage"), cumulative=False)

    def _take(self, usage: object, *, cumulative: bool) -> None:
        count = _from_usage(self.protocol, usage)
        if count is None:
            return
        if cumulative and isinstance(usage, dict):
            # message_delta carries the output so far; input only when the API repeats it
            if count.tokens_in:
                self._in = count.tokens_in
            self._out = count.tokens_out
        else:
            self._in, self._out = count.tokens_in, count.tokens_out
        self.seen = True
