"""The agent's model transcript as evidence: ``model_calls.jsonl`` bound to the trajectory.

Every call the agent makes to its model goes through the run's model gateway
(:mod:`ale_robotics.gateway`), which writes two records of it, in this order, under one
lock so that both files list the calls in the same order:

1. one line of ``runs/<run_id>/model_calls.jsonl`` (:class:`ModelCallRecord`, in the
   trajectory's canonical JSON): the request and response bodies, as the bytes that
   crossed the gateway (UTF-8 text, else base64), and what the gateway made of them
   (model, status, tokens, latency, a refusal). A refused call keeps its request's size
   and SHA-256 only, not its body: what the agent sends is bounded by its disk quota on
   forwarded calls alone (the transcript counts against it), not by how often it can be
   refused;
2. one ``harness`` event of kind ``model_call`` in the trajectory
   (:class:`ModelCallEvent`): the same facts without the bodies, the SHA-256 of each
   body and of the whole line (``record_sha256``).

The trajectory's hash chain then covers the transcript: :func:`check_transcript` reads
the file against the chain's ``model_call`` events (call numbers 0, 1, 2 ..., one line
per event, each line's hash and body hashes as the event says) and names the first line
that differs. Like every harness event, this binds the file to a chain that whoever can
write both files could rewrite; what it adds is that a transcript edited after the run,
or not the one the run recorded, no longer verifies against the recorded head.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.trajectory.errors import EventFormatError
from ale_robotics.trajectory.events import (
    Event,
    canonical_json,
    describe_validation_error,
    parse_json_line,
)

__all__ = [
    "MODEL_CALL_EVENT_KIND",
    "TRANSCRIPT_FILE",
    "ModelCallEvent",
    "ModelCallRecord",
    "Protocol",
    "Refusal",
    "UsageSource",
    "body_bytes",
    "body_field",
    "check_transcript",
]

MODEL_CALL_EVENT_KIND: Final = "model_call"
TRANSCRIPT_FILE: Final = "model_calls.jsonl"

Protocol = Literal["openai", "anthropic"]
Refusal = Literal[
    "auth",
    "model",
    "budget",
    "bad_request",
    "not_found",
    "upstream",
    "tool",
    "too_large",
    "busy",
    "quota",
]
UsageSource = Literal["upstream", "estimated", "none"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelCallEvent(_Strict):
    """The payload of a ``model_call`` trajectory event: one model call, without bodies."""

    call: int = Field(ge=0, description="0-based number of the call in the run.")
    protocol: Protocol = Field(description="Which API the agent spoke: 'openai' or 'anthropic'.")
    endpoint: str = Field(description="The path the agent called, e.g. /v1/chat/completions.")
    model: str | None = Field(description="The model the request named (None: none named).")
    status: int = Field(description="HTTP status the agent got.")
    stream: bool = Field(description="Whether the response was streamed (server-sent events).")
    refused: Refusal | None = Field(
        description="Why the gateway answered itself instead of the upstream: 'auth' (not "
        "the run's key), 'model' (not allowed), 'budget' (token budget used), "
        "'bad_request', 'not_found', 'upstream' (unreachable, or it redirected), 'tool' (a "
        "provider-side tool not allowed), 'too_large' (a body over the cap), 'busy' (too "
        "many calls in flight), 'quota' (the run's disk quota is used); None: forwarded."
    )
    tokens_in: int = Field(ge=0, description="Input tokens, from the upstream's usage.")
    tokens_out: int = Field(ge=0, description="Output tokens, from the upstream's usage.")
    usage_source: UsageSource = Field(
        description="'upstream': its usage fields; 'estimated': it gave none, so the "
        "gateway counted a token per 4 bytes of request and response; 'none': no tokens."
    )
    latency_s: float = Field(ge=0, description="Seconds from the request to the response's end.")
    request_sha256: str = Field(description="SHA-256 of the request body's bytes.")
    response_sha256: str = Field(description="SHA-256 of the response body's bytes.")
    record_sha256: str = Field(description="SHA-256 of the call's line in model_calls.jsonl.")
    request_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Size of the request body (of the bytes read, for one over the cap); "
        "None in transcripts written before it was recorded.",
    )


class ModelCallRecord(_Strict):
    """One line of ``model_calls.jsonl``: a model call with its full bodies."""

    call: int = Field(ge=0, description="0-based number of the call in the run.")
    time: str = Field(description="When the request arrived (UTC, RFC 3339).")
    protocol: Protocol
    endpoint: str
    model: str | None
    status: int
    stream: bool
    refused: Refusal | None
    reason: str | None = Field(description="The refusal's message, as the agent got it.")
    tokens_in: int = Field(ge=0)
    tokens_out: int = Field(ge=0)
    usage_source: UsageSource
    latency_s: float = Field(ge=0)
    request: str | None = Field(
        description="The request body: its text, or base64 (request_encoding); None for a "
        "refused call, whose body is not kept (request_bytes and request_sha256 are)."
    )
    request_encoding: Literal["utf-8", "base64"] | None
    request_bytes: int | None = Field(default=None, ge=0, description="The request's size.")
    request_sha256: str | None = Field(
        default=None, description="SHA-256 of the request body (of the bytes read)."
    )
    response: str = Field(description="The response body (the whole event stream if streamed).")
    response_encoding: Literal["utf-8", "base64"]

    def to_line(self) -> bytes:
        """The record's line: canonical JSON and a newline."""
        return canonical_json(self.model_dump(mode="json")) + b"\n"


def body_field(data: bytes) -> tuple[str, Literal["utf-8", "base64"]]:
    """A body as a JSON string field: its text when it is UTF-8, else its base64."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def body_bytes(text: str, encoding: Literal["utf-8", "base64"]) -> bytes:
    """The bytes :func:`body_field` stored as ``text``."""
    return text.encode("utf-8") if encoding == "utf-8" else base64.b64decode(text)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_transcript(events: Iterable[Event], path: Path | str) -> str | None:
    """The first way ``path`` (a ``model_calls.jsonl``) differs from the ``model_call``
    events of a verified trajectory, or None when it matches them line for line.

    A missing file matches a trajectory with no ``model_call`` event.
    """
    path = Path(path)
    calls: list[tuple[Event, ModelCallEvent]] = []
    for event in events:
        if event.kind != MODEL_CALL_EVENT_KIND or event.level != "harness":
            continue
        try:
            payload = ModelCallEvent.model_validate(event.payload)
        except pydantic.ValidationError as exc:
            return f"model_call event {event.seq}: {describe_validation_error(exc)}"
        if payload.call != len(calls):
            return (
                f"model_call event {event.seq} is call {payload.call}, expected "
                f"{len(calls)} (a call's event was removed or moved)"
            )
        calls.append((event, payload))
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if calls:
            return f"{path.name} is missing, but the trajectory records {len(calls)} model call(s)"
        return None
    except OSError as exc:
        return f"cannot read {path}: {exc}"
    lines = data.split(b"\n")
    if lines[-1] != b"":
        return f"{path.name} line {len(lines)}: torn (no final newline)"
    lines.pop()
    for index, raw in enumerate(lines):
        if index >= len(calls):
            return (
                f"{path.name} line {index + 1}: a call the trajectory does not record "
                f"(it records {len(calls)})"
            )
        reason = _check_line(raw, index, *calls[index])
        if reason is not None:
            return f"{path.name} line {index + 1} (call {index}): {reason}"
    if len(lines) < len(calls):
        return (
            f"{path.name} has {len(lines)} line(s), but the trajectory records "
            f"{len(calls)} model call(s) (lines were removed)"
        )
    return None


def _check_line(raw: bytes, index: int, event: Event, payload: ModelCallEvent) -> str | None:
    if _sha256(raw + b"\n") != payload.record_sha256:
        return (
            f"does not match the record_sha256 of its model_call event (seq {event.seq}): "
            "the line was edited"
        )
    # The hash matched, so the line is the one the gateway wrote; check it says the same.
    try:
        record = ModelCallRecord.model_validate(parse_json_line(raw))
    except EventFormatError as exc:
        return str(exc)
    except pydantic.ValidationError as exc:
        return describe_validation_error(exc)
    if record.call != index:
        return f"is call {record.call}"
    if record.request is None or record.request_encoding is None:
        if record.refused is None:
            return "a forwarded call without its request body"
        if record.request_sha256 != payload.request_sha256:
            return "its request_sha256 does not match its model_call event's"
    elif _sha256(body_bytes(record.request, record.request_encoding)) != payload.request_sha256:
        return "its request body does not match request_sha256"
    if _sha256(body_bytes(record.response, record.response_encoding)) != payload.response_sha256:
        return "its response body does not match response_sha256"
    return None
