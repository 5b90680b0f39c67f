"""Recording each model call: its line in ``model_calls.jsonl`` and its trajectory event.

Both are written under one lock, the line first (fsync'd) and then the event, so the
n-th line and the n-th ``model_call`` event are the same call
(:mod:`ale_robotics.trajectory.transcript` says what binds them). A refused call's line
keeps its request's size and SHA-256, not its body. :attr:`TranscriptRecorder.bytes_written`
is what the transcript holds on the host: the harness counts it against the run's disk
quota, and the gateway stops forwarding once it reaches it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.trajectory import TrajectoryWriter
from ale_robotics.trajectory.events import format_time
from ale_robotics.trajectory.transcript import (
    MODEL_CALL_EVENT_KIND,
    ModelCallEvent,
    ModelCallRecord,
    Protocol,
    Refusal,
    UsageSource,
    body_field,
)

__all__ = ["CallFacts", "TranscriptRecorder"]


@dataclass(frozen=True)
class CallFacts:
    """One finished call, as the gateway saw it."""

    time: str
    protocol: Protocol
    endpoint: str
    model: str | None
    status: int
    stream: bool
    refused: Refusal | None
    reason: str | None
    tokens_in: int
    tokens_out: int
    usage_source: UsageSource
    latency_s: float
    request: bytes
    """The request body, or, for a refused call (not kept), b''."""
    request_bytes: int
    request_sha256: str
    response: bytes


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class TranscriptRecorder:
    """Appends calls to ``path`` (``model_calls.jsonl``) and, if given, to the trajectory."""

    def __init__(self, path: Path, trajectory: TrajectoryWriter | None) -> None:
        self.path = path
        self.trajectory = trajectory
        self._lock = threading.Lock()
        self._next = 0
        self.bytes_written = 0
        """Bytes appended to the transcript by this recorder."""

    @staticmethod
    def now() -> str:
        return format_time()

    def record(self, facts: CallFacts) -> int:
        """Write the call; returns its number."""
        kept = facts.refused is None
        request, request_encoding = body_field(facts.request) if kept else (None, None)
        response, response_encoding = body_field(facts.response)
        source = facts.usage_source
        with self._lock:
            call = self._next
            record = ModelCallRecord(
                call=call,
                time=facts.time,
                protocol=facts.protocol,
                endpoint=facts.endpoint,
                model=facts.model,
                status=facts.status,
                stream=facts.stream,
                refused=facts.refused,
                reason=facts.reason,
                tokens_in=facts.tokens_in,
                tokens_out=facts.tokens_out,
                usage_source=source,
                latency_s=round(facts.latency_s, 6),
                request=request,
                request_encoding=request_encoding,
                request_bytes=facts.request_bytes,
                request_sha256=facts.request_sha256,
                response=response,
                response_encoding=response_encoding,
            )
            line = record.to_line()
            self._append(line)
            if self.trajectory is not None:
                event = ModelCallEvent(
                    call=call,
                    protocol=facts.protocol,
                    endpoint=facts.endpoint,
                    model=facts.model,
                    status=facts.status,
                    stream=facts.stream,
                    refused=facts.refused,
                    tokens_in=facts.tokens_in,
                    tokens_out=facts.tokens_out,
                    usage_source=source,
                    latency_s=record.latency_s,
                    request_sha256=facts.request_sha256,
                    response_sha256=_sha256(facts.response),
                    record_sha256=_sha256(line),
                    request_bytes=facts.request_bytes,
                )
                self.trajectory.append(
                    "harness", MODEL_CALL_EVENT_KIND, event.model_dump(mode="json")
                )
            self._next += 1
            self.bytes_written += len(line)
            return call

    def _append(self, line: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
