"""What the gateway reads from and writes in the two provider protocols.

The protocol of a request is decided by its path alone (:func:`protocol_of`): a header
the agent sends cannot make the gateway read an OpenAI answer as an Anthropic one and
find no tokens in it. The gateway forwards bodies unchanged but for the fields below
(:func:`prepare_request`) and reads only what its policy needs: the model a request
names, whether it streams, how many tokens it may produce, and the token counts the
upstream reports. Counts are read strictly (whole non-negative numbers, both of a pair):
a usage the gateway cannot read is no usage, and the call is then counted by an estimate
(:func:`estimate`), never as 0. Other fields are ignored, so that an upstream that adds
some (every provider does, often) still works; the agents' side uses the official SDKs
unchanged.

=========== ======================================= ===========================================
protocol    usage, one response                      usage, streamed (server-sent events)
=========== ======================================= ===========================================
openai      ``usage.prompt_tokens`` /                a last chunk with ``usage``, sent when the
(chat,      ``completion_tokens`` (chat, legacy      request has ``stream_options.include_usage``
completions, completions, embeddings);               (the gateway sets it on every streamed chat
responses)  ``usage.input_tokens`` /                 or completions request); responses:
            ``output_tokens`` (responses)            ``response.completed``'s (``.incomplete``,
                                                     ``.failed``) ``response.usage``
anthropic   ``usage.input_tokens`` (+ cache          ``message_start``'s ``message.usage``, then
(messages)  creation and cache read) /               ``message_delta``'s ``usage`` (cumulative)
            ``output_tokens``
=========== ======================================= ===========================================

What a call may produce (:class:`Prepared`): its output cap (chat's
``max_completion_tokens`` or ``max_tokens``, times ``n``; legacy completions'
``max_tokens`` times ``n`` or ``best_of``; the Responses API's ``max_output_tokens``;
Anthropic's ``max_tokens``), and whether its input is all in its body. In a run with a
token budget, a request that sets no cap gets :data:`DEFAULT_OUTPUT_CAP` (in the field
its API reads), so that every call forwarded has a known most it can cost.

Errors the gateway makes itself are in each protocol's error shape, so that the SDKs raise
their usual exception with the message (``openai.RateLimitError``,
``anthropic.PermissionDeniedError``, ...).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "FREE_ENDPOINTS",
    "Prepared",
    "Protocol",
    "RequestError",
    "SseUsage",
    "TokenCount",
    "error_body",
    "estimate",
    "neutral_error_body",
    "parse_body",
    "prepare_request",
    "protocol_of",
    "usage_from_body",
]

Protocol = Literal["openai", "anthropic"]

DEFAULT_OUTPUT_CAP: Final = 32_768
"""Output tokens a call may produce when a run has a token budget and the request sets
no cap of its own (docs/model-gateway.md)."""
MAX_CHOICES: Final = 128
"""The most completions one request may ask for (``n``, ``best_of``): OpenAI's own limit."""
FREE_ENDPOINTS: Final = frozenset({"/v1/messages/count_tokens"})
"""Endpoints that produce no tokens and that providers do not bill: counted as 0."""

_OUTPUT_FIELDS: Final = {
    "/v1/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/v1/completions": ("max_tokens",),
    "/v1/responses": ("max_output_tokens",),
    "/v1/messages": ("max_tokens",),
}
"""Where each endpoint reads its output cap; the first is the one the gateway sets."""
_CHOICE_FIELDS: Final = {
    "/v1/chat/completions": ("n",),
    "/v1/completions": ("n", "best_of"),
}
_PROVIDER_STATE: Final = ("previous_response_id", "conversation", "prompt")
"""Responses API fields that bring input kept on the provider's side (a stored response,
conversation or prompt): the call's input is not all in its body."""
_STREAM_USAGE: Final = ("/v1/chat/completions", "/v1/completions")

_OPENAI_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    413: "invalid_request_error",
    429: "insufficient_quota",
    502: "upstream_error",
    507: "insufficient_storage",
}
_ANTHROPIC_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "api_error",
    507: "api_error",
}


class RequestError(ValueError):
    """A request the gateway cannot meter as it stands (a 400 saying what to fix)."""


@dataclass(frozen=True)
class TokenCount:
    """Tokens of one call, as the upstream reported them (or as estimated)."""

    tokens_in: int
    tokens_out: int

    @property
    def total(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True)
class Prepared:
    """A request as the gateway forwards it, and the most it can cost."""

    body: dict[str, Any] | None
    """The body to send, or None to send the agent's bytes unchanged."""
    max_output: int | None
    """The most output tokens it can produce (None: the API's own default, no budget)."""
    bounded_input: bool
    """False when part of its input is kept by the provider (:data:`_PROVIDER_STATE`)."""
    free: bool = False
    """A call that produces no tokens (:data:`FREE_ENDPOINTS`)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise RequestError(f"the request body has the key {key!r} twice")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise RequestError(f"the request body has {name}, which is not JSON")


def parse_body(data: bytes) -> dict[str, Any]:
    """A request body as the gateway checks it: a JSON object, read so that no other
    parser can read it otherwise (a key given twice, which parsers resolve differently,
    and NaN or Infinity are refused). Raises :class:`RequestError`."""
    try:
        body = json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RequestError:
        raise
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    return body


def protocol_of(path: str) -> Protocol:
    """The protocol of a request to ``path``: its path alone decides (module docstring)."""
    return "anthropic" if path == "/v1/messages" or path.startswith("/v1/messages/") else "openai"


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


def neutral_error_body(status: int, message: str, code: str) -> bytes:
    """An error both SDKs read (for paths of no protocol: ``/v1/models``, unknown ones):
    Anthropic's shape, with OpenAI's ``code`` and ``param`` beside its ``type``."""
    kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    error = {"type": kind, "message": message, "code": code, "param": None}
    return json.dumps({"type": "error", "error": error}).encode("utf-8")


def _positive(body: dict[str, Any], name: str, most: int | None = None) -> int | None:
    """``body[name]``: None when absent or null, else a whole number >= 1 (and <= most)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(f"{name} must be a whole number of at least 1, not {value!r}")
    if most is not None and value > most:
        raise RequestError(f"{name} must be at most {most}, not {value}")
    return value


def prepare_request(
    endpoint: str, body: dict[str, Any], *, output_cap: int | None = None
) -> Prepared:
    """``body`` as the gateway forwards it, and the most it can cost.

    Two changes, each only where needed: a streamed OpenAI chat or completions request
    gets ``stream_options.include_usage = true``, without which the stream carries no
    usage (it adds one last chunk, ``choices`` empty, that the official SDKs expect); and,
    given ``output_cap`` (a run with a token budget), a request that sets no output cap
    gets that one. Raises :class:`RequestError` for a cap or a count of choices that is
    not a whole number (the upstream could read it otherwise than the gateway).
    """
    if endpoint in FREE_ENDPOINTS:
        return Prepared(None, 0, bounded_input=True, free=True)
    changed: dict[str, Any] | None = None
    fields = _OUTPUT_FIELDS.get(endpoint, ())
    caps = [c for c in (_positive(body, f) for f in fields) if c is not None]
    counts = (_positive(body, f, MAX_CHOICES) for f in _CHOICE_FIELDS.get(endpoint, ()))
    choices = max([c for c in counts if c is not None], default=1)
    max_output: int | None = max(caps) if caps else None
    if fields and max_output is None and output_cap is not None:
        changed = {**body, fields[0]: output_cap}
        max_output = output_cap
    if max_output is not None:
        max_output *= choices
    elif not fields:
        max_output = 0  # embeddings: input only
    if endpoint in _STREAM_USAGE and body.get("stream") is True:
        options = body.get("stream_options")
        if not (isinstance(options, dict) and options.get("include_usage") is True):
            new_options = dict(options) if isinstance(options, dict) else {}
            new_options["include_usage"] = True
            changed = {**(changed or body), "stream_options": new_options}
    bounded = endpoint != "/v1/responses" or all(body.get(f) is None for f in _PROVIDER_STATE)
    return Prepared(changed, max_output, bounded_input=bounded)


def estimate(request: bytes, response: bytes) -> TokenCount:
    """A call's tokens when the upstream reported none: a token per 4 bytes of request and
    of response, at least one each (a call forwarded is never free)."""
    return TokenCount(max(1, math.ceil(len(request) / 4)), max(1, math.ceil(len(response) / 4)))


def _count(value: object) -> int | None:
    """A token count: a whole number >= 0 (None: anything else, booleans included)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _optional(usage: dict[str, Any], name: str) -> int | None:
    """An optional count: 0 when absent or null, None when present but not a count."""
    value = usage.get(name)
    return 0 if value is None else _count(value)


def _anthropic_in(usage: dict[str, Any], *, required: bool) -> int | None:
    parts = [
        _count(usage.get("input_tokens")) if required else _optional(usage, "input_tokens"),
        _optional(usage, "cache_creation_input_tokens"),
        _optional(usage, "cache_read_input_tokens"),
    ]
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def _from_usage(protocol: Protocol, usage: object, endpoint: str = "") -> TokenCount | None:
    """The counts in a usage object, read strictly (module docstring); None: unreadable."""
    if not isinstance(usage, dict):
        return None
    if protocol == "anthropic":
        tokens_in = _anthropic_in(usage, required=True)
        tokens_out = _count(usage.get("output_tokens"))
        return (
            None if tokens_in is None or tokens_out is None else TokenCount(tokens_in, tokens_out)
        )
    for names in (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens")):
        tokens_in, tokens_out = (_count(usage.get(n)) for n in names)
        if tokens_in is not None and tokens_out is not None:
            return TokenCount(tokens_in, tokens_out)
    prompt = _count(usage.get("prompt_tokens"))
    if endpoint == "/v1/embeddings" and prompt is not None and "completion_tokens" not in usage:
        return TokenCount(prompt, 0)
    return None


def usage_from_body(protocol: Protocol, body: bytes, endpoint: str = "") -> TokenCount | None:
    """The token counts of a (not streamed) JSON response; None when it reports none it
    can read."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    return _from_usage(protocol, doc.get("usage"), endpoint)


_RESPONSE_ENDS: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})


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
                self._start(doc["message"].get("usage"))
            elif kind == "message_delta":
                self._delta(doc.get("usage"))
            return
        if doc.get("type") in _RESPONSE_ENDS and isinstance(doc.get("response"), dict):
            self._take(_from_usage("openai", doc["response"].get("usage")))
        elif doc.get("usage") is not None:
            self._take(_from_usage("openai", doc.get("usage")))

    def _take(self, count: TokenCount | None) -> None:
        if count is not None:
            self._in, self._out = count.tokens_in, count.tokens_out
            self.seen = True

    def _start(self, usage: object) -> None:
        """``message_start``: the input (cache included) and the output so far."""
        if not isinstance(usage, dict):
            return
        tokens_in = _anthropic_in(usage, required=True)
        tokens_out = _optional(usage, "output_tokens")
        if tokens_in is not None and tokens_out is not None:
            self._in, self._out = tokens_in, tokens_out
            self.seen = True

    def _delta(self, usage: object) -> None:
        """``message_delta``: the output so far; the input only where the API repeats it."""
        if not isinstance(usage, dict):
            return
        tokens_out = _count(usage.get("output_tokens"))
        tokens_in = _anthropic_in(usage, required=False)
        if tokens_out is None or tokens_in is None:
            return
        if tokens_in:
            self._in = tokens_in
        self._out = tokens_out
        self.seen = True
