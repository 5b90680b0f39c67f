"""The model gateway: an OpenAI- and Anthropic-compatible HTTP endpoint in front of the
operator's upstream, run by the harness (trusted side), one per run.

It listens on a Unix socket that the harness binds into the agent's sandbox (and, for a
run without a sandbox, on an ephemeral port of the host's loopback); inside the sandbox,
:mod:`.relay` makes that socket a loopback TCP port for the SDKs. For each request:

1. the agent's key must be this run's gateway key (``Authorization: Bearer`` or
   ``x-api-key``), else 401: the upstream key never reaches the sandbox;
2. the body must be a JSON object naming an allowed model, else 400 / 403 naming the
   allow-list;
3. while the token budget is not used up, the request goes to the upstream with the
   operator's key (a streamed OpenAI request gets ``stream_options.include_usage``,
   :func:`.protocols.prepare_request`), else 429 "model token budget of N used";
4. the response comes back as the upstream sent it, server-sent events streamed through
   as they arrive; the tokens are read from its usage fields (:mod:`.protocols`);
5. the call is recorded (:mod:`.recorder`): bodies in ``model_calls.jsonl``, a
   ``model_call`` event in the trajectory.

Refusals carry ``x-should-retry: false``, so the official SDKs raise at once instead of
retrying a call that cannot succeed. ``GET /v1/models`` lists the allow-list (in the
Anthropic shape when the request has ``anthropic-version``) without calling the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any, Final

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from ale_robotics.gateway.call import GatewayCall, write_chunk
from ale_robotics.gateway.protocols import (
    Protocol,
    SseUsage,
    TokenCount,
    error_body,
    prepare_request,
    usage_from_body,
)
from ale_robotics.gateway.recorder import TranscriptRecorder
from ale_robotics.gateway.usage import GatewayPolicy, ModelUsage, TokenLedger
from ale_robotics.trajectory import TrajectoryWriter

__all__ = ["MAX_BODY_BYTES", "ModelGateway", "upstream_base"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES: Final = 64 * 1024**2
"""The largest request body the gateway takes (a long conversation is resent whole)."""

_OPENAI_POSTS: Final = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",
)
_ANTHROPIC_POSTS: Final = ("/v1/messages", "/v1/messages/count_tokens")
_PASSED_REQUEST_HEADERS: Final = ("accept", "anthropic-version", "anthropic-beta", "openai-beta")
_PASSED_RESPONSE_HEADERS: Final = (
    "content-type",
    "retry-after",
    "x-should-retry",
    "request-id",
    "x-request-id",
)
_NO_RETRY: Final = {"x-should-retry": "false"}
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


class ModelGateway:
    """One run's gateway; :meth:`start` it, give the agent :meth:`agent_env`, :meth:`stop` it.

    ``socket_path``: the Unix socket to listen on (its directory is what the harness binds
    into the sandbox; nothing else should be in it). ``tcp``: also listen on an ephemeral
    port of 127.0.0.1 (for an agent without a sandbox). ``transcript``: the
    ``model_calls.jsonl`` to write; ``trajectory``: where each call's event goes.
    """

    def __init__(
        self,
        *,
        upstream: str,
        upstream_key: str | None,
        policy: GatewayPolicy,
        socket_path: Path,
        transcript: Path,
        trajectory: TrajectoryWriter | None = None,
        tcp: bool = False,
        upstream_timeout_s: float = 600.0,
    ) -> None:
        self.upstream = upstream_base(upstream)
        self._upstream_key = upstream_key
        self.policy = policy
        self.socket_path = socket_path
        self.transcript = transcript
        self.ledger = TokenLedger(policy)
        self.recorder = TranscriptRecorder(transcript, trajectory)
        self.token = "ale-gw-" + secrets.token_urlsafe(32)
        """The agent's key: valid for this gateway only, so dead once the run ends."""
        self.tcp_port: int | None = None
        self._tcp = tcp
        self._timeout = ClientTimeout(total=None, sock_connect=30, sock_read=upstream_timeout_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None

    # -- life cycle --------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> ModelGateway:
        """Listen (in a thread of this process) until :meth:`stop`."""
        if self._loop is not None:
            raise RuntimeError("the model gateway is already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="ale-model-gateway", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), loop).result(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> ModelUsage:
        """Stop listening (the agent's key dies with it); returns the run's account."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            if loop.is_running():
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(self._stop(), loop).result(30)
                loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            loop.close()
        self._loop = self._thread = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        return self.usage()

    def __enter__(self) -> ModelGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def usage(self) -> ModelUsage:
        usage = self.ledger.snapshot()
        usage.transcript = self.transcript.name
        return usage

    def agent_env(self, base_url: str) -> dict[str, str]:
        """The variables the agent's SDKs read, for the gateway reached at ``base_url``
        (``http://127.0.0.1:PORT``: the relay's port in a sandbox, :attr:`tcp_port` outside)."""
        base_url = base_url.rstrip("/")
        return {
            "OPENAI_BASE_URL": f"{base_url}/v1",
            "OPENAI_API_KEY": self.token,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": self.token,
            "ALE_MODEL": self.policy.models[0],
            "ALE_MODELS": ",".join(self.policy.models),
            **(
                {}
                if self.policy.budget_tokens is None
                else {"ALE_MODEL_BUDGET_TOKENS": str(self.policy.budget_tokens)}
            ),
        }

    async def _start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/models/{model:.+}", self._model)
        for path in (*_OPENAI_POSTS, *_ANTHROPIC_POSTS):
            app.router.add_post(path, self._call)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        self._session = ClientSession(timeout=self._timeout, auto_decompress=False)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        self._runner = runner
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(self.socket_path))
        await web.SockSite(runner, unix).start()
        if self._tcp:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tcp.bind(("127.0.0.1", 0))
            self.tcp_port = int(tcp.getsockname()[1])
            await web.SockSite(runner, tcp).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # -- requests ----------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        given = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    @staticmethod
    def _protocol(request: web.Request) -> Protocol:
        if request.path.startswith("/v1/messages") or "anthropic-version" in request.headers:
            return "anthropic"
        return "openai"

    def _error(self, protocol: Protocol, status: int, message: str, code: str) -> web.Response:
        return web.Response(
            status=status,
            body=error_body(protocol, status, message, code),
            content_type="application/json",
            headers=_NO_RETRY,
        )

    async def _not_found(self, request: web.Request) -> web.Response:
        protocol = self._protocol(request)
        return self._error(
            protocol,
            404,
            f"{request.method} {request.path} is not served by the ALE model gateway (it serves "
            f"POST {', '.join((*_OPENAI_POSTS, *_ANTHROPIC_POSTS))} and GET /v1/models)",
            "not_found",
        )

    async def _models(self, request: web.Request) -> web.Response:
        protocol = self._protocol(request)
        if not self._authorized(request):
            return self._error(protocol, 401, "not this run's model gateway key", "invalid_api_key")
        if protocol == "anthropic":
            data: list[dict[str, Any]] = [self._model_doc(protocol, m) for m in self.policy.models]
            doc: dict[str, Any] = {
                "data": data,
                "has_more": False,
                "first_id": self.policy.models[0],
                "last_id": self.policy.models[-1],
            }
        else:
            doc = {
                "object": "list",
                "data": [self._model_doc(protocol, m) for m in self.policy.models],
            }
        return web.json_response(doc)

    async def _model(self, request: web.Request) -> web.Response:
        protocol = self._protocol(request)
        if not self._authorized(request):
            return self._error(protocol, 401, "not this run's model gateway key", "invalid_api_key")
        name = request.match_info["model"]
        if not self.policy.allows(name):
            return self._error(protocol, 404, self.policy.refusal(name), "model_not_found")
        return web.json_response(self._model_doc(protocol, name))

    @staticmethod
    def _model_doc(protocol: Protocol, name: str) -> dict[str, Any]:
        if protocol == "anthropic":
            return {
                "type": "model",
                "id": name,
                "display_name": name,
                "created_at": "1970-01-01T00:00:00Z",
            }
        return {"id": name, "object": "model", "created": 0, "owned_by": "ale-robotics"}

    async def _call(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        arrived = TranscriptRecorder.now()
        protocol = self._protocol(request)
        endpoint = request.path
        raw = await request.read()
        call = GatewayCall(arrived, protocol, endpoint, raw)
        response = await self._answer(request, call)
        call.latency_s = time.monotonic() - started
        if call.refused is not None:
            self.ledger.refuse(budget=call.refused == "budget")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.recorder.record, call.facts())
        except Exception:  # the call happened; a transcript that cannot be written is logged
            logger.exception("could not record model call to %s", self.transcript)
        if call.open_stream is not None and await write_chunk(call.open_stream, call.held):
            with contextlib.suppress(ConnectionResetError, ClientError):
                await call.open_stream.write_eof()
        return response

    async def _answer(self, request: web.Request, call: GatewayCall) -> web.StreamResponse:
        protocol = call.protocol
        if not self._authorized(request):
            return call.refuse(
                self._error(protocol, 401, "not this run's model gateway key", "invalid_api_key"),
                "auth",
            )
        try:
            body = json.loads(call.request)
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            return call.refuse(
                self._error(protocol, 400, "the request body must be a JSON object", "bad_request"),
                "bad_request",
            )
        model = body.get("model")
        call.model = model if isinstance(model, str) else None
        call.stream = body.get("stream") is True
        if not self.policy.allows(call.model):
            return call.refuse(
                self._error(protocol, 403, self.policy.refusal(call.model), "model_not_allowed"),
                "model",
            )
        if self.ledger.exhausted():
            return call.refuse(
                self._error(
                    protocol,
                    429,
                    self.policy.budget_message(self.ledger.used()),
                    "model_token_budget_exceeded",
                ),
                "budget",
            )
        prepared = prepare_request(call.endpoint, body)
        data = call.request if prepared is None else json.dumps(prepared).encode("utf-8")
        try:
            return await self._forward(request, call, data)
        finally:
            self._account(call)

    def _upstream_headers(self, request: web.Request, protocol: Protocol) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        for name in _PASSED_REQUEST_HEADERS:
            value = request.headers.get(name)
            if value is not None:
                headers[name] = value
        if protocol == "anthropic":
            headers.setdefault("anthropic-version", _DEFAULT_ANTHROPIC_VERSION)
            if self._upstream_key:
                headers["x-api-key"] = self._upstream_key
        elif self._upstream_key:
            headers["authorization"] = f"Bearer {self._upstream_key}"
        return headers

    async def _forward(
        self, request: web.Request, call: GatewayCall, data: bytes
    ) -> web.StreamResponse:
        assert self._session is not None
        url = self.upstream + call.endpoint
        if request.query_string:
            url += "?" + request.query_string
        try:
            upstream = await self._session.post(
                url, data=data, headers=self._upstream_headers(request, call.protocol)
            )
        except (ClientError, TimeoutError, OSError) as exc:
            return call.refuse(
                self._error(
                    call.protocol,
                    502,
                    f"the model upstream could not be reached ({type(exc).__name__})",
                    "upstream_unreachable",
                ),
                "upstream",
            )
        async with upstream:
            headers = {
                k: v for k in _PASSED_RESPONSE_HEADERS if (v := upstream.headers.get(k)) is not None
            }
            call.status = upstream.status
            if upstream.headers.get("content-type", "").startswith("text/event-stream"):
                call.stream = True
                return await self._stream(request, call, upstream.content, headers)
            body = await upstream.read()
            call.response = body
            call.count = usage_from_body(call.protocol, body)
            return web.Response(status=upstream.status, body=body, headers=headers)

    async def _stream(
        self,
        request: web.Request,
        call: GatewayCall,
        content: Any,
        headers: dict[str, str],
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=call.status, headers=headers)
        sse = SseUsage(call.protocol)
        chunks: list[bytes] = []
        await response.prepare(request)
        client_gone = False
        async for chunk in content.iter_any():
            # Each chunk is passed on when the next one arrives: the last one (the end of
            # the stream, which an SDK stops reading at) only once the call is recorded.
            if chunks and not client_gone:
                client_gone = not await write_chunk(response, chunks[-1])
            chunks.append(chunk)
            sse.feed(chunk)
        sse.close()
        call.response = b"".join(chunks)
        call.count = sse.count
        if not client_gone:
            call.open_stream = response
            call.held = chunks[-1] if chunks else b""
        return response

    def _account(self, call: GatewayCall) -> None:
        if call.refused is not None:
            return
        model = call.model or "?"
        if call.count is not None:
            call.usage_source = "upstream"
            call.tokens = call.count
        elif call.status < 400:
            # An upstream that reports no usage is still metered: a token per 4 bytes.
            estimate = TokenCount(len(call.request) // 4, len(call.response) // 4)
            call.usage_source, call.tokens = "estimated", estimate
        self.ledger.add(
            model,
            call.tokens.tokens_in,
            call.tokens.tokens_out,
            estimated=call.usage_source == "estimated",
        )
