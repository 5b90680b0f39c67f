"""What one request to the model gateway turned into, and how a chunk reaches the agent.

:class:`GatewayCall` is filled in as :mod:`.server` answers the request (the model asked
for, a refusal and its reason, the upstream's status, the response, the tokens counted)
and becomes the :class:`~.recorder.CallFacts` that :mod:`.recorder` writes. It is apart
from the server so that the server holds the HTTP handling only, and what a call records
is read in one place.
"""

from __future__ import annotations

import hashlib
import json

from aiohttp import ClientError, web

from ale_robotics.gateway.protocols import Protocol, TokenCount
from ale_robotics.gateway.recorder import CallFacts
from ale_robotics.trajectory.transcript import Refusal, UsageSource

__all__ = ["GatewayCall", "write_chunk"]


async def write_chunk(response: web.StreamResponse, chunk: bytes) -> bool:
    """Pass ``chunk`` on; False when the agent went away (the upstream is read to its end
    all the same, so that the call's usage is counted)."""
    try:
        if chunk:
            await response.write(chunk)
    except (ConnectionResetError, ClientError):
        return False
    return True


class GatewayCall:
    """What one request turned into, filled in as it goes."""

    def __init__(self, time_: str, protocol: Protocol, endpoint: str) -> None:
        self.time = time_
        self.protocol: Protocol = protocol
        self.endpoint = endpoint
        self.request = b""
        """The request body, as read (empty for one not kept: refused before it was read
        whole, or over the cap)."""
        self.request_bytes = 0
        self.request_sha256 = hashlib.sha256(b"").hexdigest()
        self.too_large = False
        self.reached = False
        """The upstream answered the call (with anything but a redirect): it is counted."""
        self.response = b""
        self.model: str | None = None
        self.stream = False
        self.status = 0
        self.refused: Refusal | None = None
        self.reason: str | None = None
        self.count: TokenCount | None = None
        self.tokens = TokenCount(0, 0)
        self.usage_source: UsageSource = "none"
        self.latency_s = 0.0
        self.open_stream: web.StreamResponse | None = None
        self.held = b""
        """A stream's last chunk, sent once the call is recorded."""

    async def read(self, request: web.Request, *, keep: bool, most: int) -> None:
        """Read the request's body: its size and SHA-256 always, the bytes themselves when
        ``keep`` and no more than ``most`` of them (:attr:`too_large` past that: reading
        stops there, the connection is closed after the answer)."""
        digest = hashlib.sha256()
        parts: list[bytes] = []
        size = 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
            digest.update(chunk)
            if size > most:
                self.too_large = True
                break
            if keep:
                parts.append(chunk)
        self.request_bytes = size
        self.request_sha256 = digest.hexdigest()
        self.request = b"" if self.too_large else b"".join(parts)

    def refuse(self, response: web.Response, why: Refusal) -> web.Response:
        self.refused = why
        self.status = response.status
        body = response.body
        self.response = body if isinstance(body, bytes) else b""
        try:
            doc = json.loads(self.response)
            err = doc.get("error", {})
            self.reason = str(err.get("message")) if isinstance(err, dict) else None
        except (ValueError, AttributeError):
            self.reason = None
        return response

    def facts(self) -> CallFacts:
        return CallFacts(
            time=self.time,
            protocol=self.protocol,
            endpoint=self.endpoint,
            model=self.model,
            status=self.status,
            stream=self.stream,
            refused=self.refused,
            reason=self.reason,
            tokens_in=self.tokens.tokens_in,
            tokens_out=self.tokens.tokens_out,
            usage_source=self.usage_source,
            latency_s=self.latency_s,
            request=self.request,
            request_bytes=self.request_bytes,
            request_sha256=self.request_sha256,
            response=self.response,
        )
