"""The model gateway: an OpenAI- and Anthropic-compatible HTTP endpoint in front of the
operator's upstream, run by the harness (trusted side), one per run.

It listens on a Unix socket that the harness binds into the agent's sandbox (and, for a
run without a sandbox, on an ephemeral port of the host's loopback); inside the sandbox,
:mod:`.relay` makes that socket a loopback TCP port for the SDKs. Every byte the agent
sends is an attack until checked. For each request:

1. at most :data:`MAX_IN_FLIGHT` calls are handled at once (429, to be retried, past it),
   and a body is read up to :data:`MAX_BODY_BYTES` (413 past it);
2. the agent's key must be this run's gateway key (``Authorization: Bearer`` or
   ``x-api-key``), else 401 (saying whether none was given or another one): the
   upstream key never reaches the sandbox;
3. the run's disk quota must have room for the call's record (507 once the transcript
   reached it: the harness stops the agent like any other quota breach);
4. the body must be a JSON object naming an allowed model (400 / 403 naming the
   allow-list), asking for no provider-side tool the operator did not allow (400 naming
   it, :mod:`.tools`), with output caps the gateway can read (400);
5. the call reserves the most it can cost and waits while calls in flight hold the rest
   of the budget; once the budget is used it is refused (429 "model token budget of N
   used"); :mod:`.usage` says why the budget cannot be overrun;
6. it goes to the upstream with the operator's key, the protocol decided by the path
   alone (:func:`.protocols.protocol_of`), the headers on :data:`PASSED_REQUEST_HEADERS`
   (none that carries a credential), the query parameters on :data:`PASSED_QUERY` only,
   ``Accept-Encoding: identity``, and no redirect followed (a 3xx is a 502 to the agent);
7. the answer comes back decoded (an upstream that compresses anyway is decompressed,
   and one in an encoding the gateway cannot read is a 502), server-sent events streamed
   through as they arrive; the tokens are read from its usage fields (:mod:`.protocols`),
   else estimated, never 0;
8. the call is recorded (:mod:`.recorder`): bodies in ``model_calls.jsonl`` (a refused
   call's request by size and SHA-256 only), a ``model_call`` event in the trajectory.

Refusals carry ``x-should-retry: false`` (but the 429 of too many calls in flight), so the
official SDKs raise at once instead of retrying a call that cannot succeed.
``GET /v1/models`` lists the allow-list without calling the upstream, in a shape both
SDKs read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Final

from aiohttp import ClientError, ClientTimeout, web

from ale_robotics.gateway.call import GatewayCall, write_chunk
from ale_robotics.gateway.listing import ANTHROPIC_POSTS, OPENAI_POSTS, Listing
from ale_robotics.gateway.protocols import (
    DEFAULT_OUTPUT_CAP,
    FREE_ENDPOINTS,
    Prepared,
    RequestError,
    estimate,
    parse_body,
    prepare_request,
    protocol_of,
)
from ale_robotics.gateway.recorder import TranscriptRecorder
from ale_robotics.gateway.tools import provider_tools
from ale_robotics.gateway.upstream import (
    PASSED_QUERY,
    PASSED_REQUEST_HEADERS,
    Upstream,
    agent_headers,
    error_response,
    upstream_base,
)
from ale_robotics.gateway.usage import GatewayPolicy, ModelUsage, TokenLedger
from ale_robotics.trajectory import TrajectoryWriter

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_IN_FLIGHT",
    "PASSED_QUERY",
    "PASSED_REQUEST_HEADERS",
    "ModelGateway",
    "agent_headers",
    "upstream_base",
]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES: Final = 16 * 1024**2
"""The largest request body the gateway takes (413 past it). A long conversation is
resent whole at every turn; 16 MiB holds a 200k-token context several times over, and
bounds, with :data:`MAX_IN_FLIGHT`, what one agent makes the harness hold in memory."""
MAX_IN_FLIGHT: Final = 8
"""Calls of one run handled at once; one more is answered 429 (retried by the SDKs)."""


def _prints_only_400s(request: web.Request) -> bool:
    """Is the client Codex (``originator: codex_exec``, ``codex_cli_rs``...)?"""
    return request.headers.get("originator", "").lower().startswith("codex")


class ModelGateway:
    """One run's gateway; :meth:`start` it, give the agent :meth:`agent_env`, :meth:`stop` it.

    ``socket_path``: the Unix socket to listen on (its directory is what the harness binds
    into the sandbox; nothing else should be in it). ``tcp``: also listen on an ephemeral
    port of 127.0.0.1 (for an agent without a sandbox). ``transcript``: the
    ``model_calls.jsonl`` to write; ``trajectory``: where each call's event goes.
    ``quota_bytes``: the run's disk quota, which the transcript counts against (None:
    none); :attr:`quota_reached` is set once it stopped a call.
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
        quota_bytes: int | None = None,
    ) -> None:
        self.upstream = upstream_base(upstream)
        self.policy = policy
        self.socket_path = socket_path
        self.transcript = transcript
        self.ledger = TokenLedger(policy)
        self.recorder = TranscriptRecorder(transcript, trajectory)
        self.token = "ale-gw-" + secrets.token_urlsafe(32)
        """The agent's key: valid for this gateway only, so dead once the run ends."""
        self._listing = Listing(policy, self.token)
        self.tcp_port: int | None = None
        self.quota_bytes = quota_bytes
        self.quota_reached = threading.Event()
        self.quota_demand = 0
        """The transcript's bytes with the call the quota stopped (once it stopped one)."""
        self.last_call_unix = 0.0
        """When the agent's last call arrived (seconds since the epoch; 0.0: none yet)."""
        self.last_refusal: tuple[float, str] | None = None
        """When the gateway last refused a call, and its message (the console shows it)."""
        self._tcp = tcp
        self._upstream = Upstream(
            self.upstream,
            upstream_key,
            ClientTimeout(total=None, sock_connect=30, sock_read=upstream_timeout_s),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._in_flight = 0
        self._settled: asyncio.Condition | None = None

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

    def stored_bytes(self) -> int:
        """What the transcript holds on the host (counted against the run's disk quota)."""
        return self.recorder.bytes_written

    def agent_env(self, base_url: str) -> dict[str, str]:
        """The variables the agent's SDKs read, for the gateway reached at ``base_url``
        (``http://127.0.0.1:PORT``: the relay's port in a sandbox, :attr:`tcp_port` outside)."""
        base_url = base_url.rstrip("/")
        return {
            "OPENAI_BASE_URL": f"{base_url}/v1",
            "OPENAI_API_KEY": self.token,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": self.token,
            "CODEX_API_KEY": self.token,  # what Codex's built-in provider reads
            "ALE_MODEL": self.policy.models[0],
            "ALE_MODELS": ",".join(self.policy.models),
            **(
                {}
                if self.policy.budget_tokens is None
                else {"ALE_MODEL_BUDGET_TOKENS": str(self.policy.budget_tokens)}
            ),
        }

    async def _start(self) -> None:
        # Bodies are read by the handler itself (GatewayCall.read), under the cap.
        app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
        listing = self._listing
        app.router.add_get("/v1/responses", listing.websocket)
        app.router.add_get("/v1/models", listing.models)
        app.router.add_get("/v1/models/{model:.+}", listing.model)
        for path in (*OPENAI_POSTS, *ANTHROPIC_POSTS):
            app.router.add_post(path, self._call)
        app.router.add_route("*", "/{tail:.*}", listing.not_found)
        self._settled = asyncio.Condition()
        await self._upstream.start()
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
        await self._upstream.close()

    # -- requests without a protocol ---------------------------------------------------------

    # -- model calls -------------------------------------------------------------------------

    async def _call(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        self.last_call_unix = time.time()
        call = GatewayCall(TranscriptRecorder.now(), protocol_of(request.path), request.path)
        response: web.StreamResponse
        if self._in_flight >= MAX_IN_FLIGHT:
            await call.read(request, keep=False, most=MAX_BODY_BYTES)
            response = call.refuse(
                error_response(
                    call.protocol,
                    429,
                    f"more than {MAX_IN_FLIGHT} model calls at once in this run: retry when "
                    "one has ended",
                    "too_many_calls_in_flight",
                    retry=True,
                ),
                "busy",
            )
        else:
            self._in_flight += 1
            try:
                response = await self._answer(request, call)
            finally:
                self._in_flight -= 1
        if _prints_only_400s(request) and call.refused not in (None, "busy", "upstream"):
            # Codex shows a refusal's reason only when it is a 400 (it prints a canned
            # line for a 429 and retries other 4xx for ~15 s first): the same refusal,
            # as a 400 (docs/agent-software-notes.md).
            response = call.refuse(
                error_response(call.protocol, 400, call.reason or "", str(call.refused)),
                call.refused,
            )
        call.latency_s = time.monotonic() - started
        if call.refused is not None:
            self.ledger.refuse(call.refused, budget=call.refused == "budget")
            self.last_refusal = (time.time(), f"{call.status} {call.reason or call.refused}")
        if not self._transcript_full():  # else the run is being stopped: nothing more kept
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(None, self.recorder.record, call.facts())
            except Exception:  # the call happened; a transcript that cannot be written is logged
                logger.exception("could not record model call to %s", self.transcript)
        if call.too_large:
            response.force_close()  # the rest of its body is not read
        if call.open_stream is not None and await write_chunk(call.open_stream, call.held):
            with contextlib.suppress(ConnectionResetError, ClientError):
                await call.open_stream.write_eof()
        return response

    async def _answer(self, request: web.Request, call: GatewayCall) -> web.StreamResponse:
        protocol = call.protocol
        await call.read(request, keep=True, most=MAX_BODY_BYTES)
        if call.too_large:
            return call.refuse(
                error_response(
                    protocol,
                    413,
                    f"the request body is over the model gateway's {MAX_BODY_BYTES // 1024**2} "
                    "MiB cap: send less (fewer or smaller images, a shorter context)",
                    "request_too_large",
                ),
                "too_large",
            )
        problem = self._listing.key_problem(request)
        if problem is not None:
            return call.refuse(error_response(protocol, 401, problem, "invalid_api_key"), "auth")
        if self._over_quota(len(call.request)):
            return call.refuse(
                error_response(
                    protocol,
                    507,
                    "the run's disk quota is used (the model transcript counts against it): "
                    "no more model calls in this run",
                    "disk_quota_exceeded",
                ),
                "quota",
            )
        checked = self._check(request, call)
        if isinstance(checked, web.Response):
            return checked
        prepared, reservation = checked
        refused = await self._admit(call, reservation)
        if refused is not None:
            return refused
        try:
            data = (
                call.request if prepared.body is None else json.dumps(prepared.body).encode("utf-8")
            )
            del checked, prepared  # the parsed body is not held while the call is in flight
            return await self._upstream.forward(request, call, data)
        finally:
            await self._settle(call, reservation)

    def _over_quota(self, more: int) -> bool:
        """Would a call with ``more`` bytes of request take the transcript past the quota?"""
        if self.quota_bytes is None:
            return False
        if self.recorder.bytes_written + more > self.quota_bytes:
            self.quota_demand = self.recorder.bytes_written + more
            self.quota_reached.set()
            return True
        return False

    def _transcript_full(self) -> bool:
        return self.quota_bytes is not None and self.recorder.bytes_written >= self.quota_bytes

    def _check(
        self, request: web.Request, call: GatewayCall
    ) -> web.Response | tuple[Prepared, int]:
        """The request's body checked against the policy (a refusal, or what to forward
        and its reservation). Parsed here on the event loop, one body at a time, and not
        kept: a body of many small objects costs far more memory parsed than read."""
        protocol = call.protocol
        try:
            body = parse_body(call.request)
        except RequestError as exc:
            return call.refuse(
                error_response(protocol, 400, str(exc), "bad_request"), "bad_request"
            )
        model = body.get("model")
        call.model = model if isinstance(model, str) else None
        call.stream = body.get("stream") is True
        if not self.policy.allows(call.model):
            return call.refuse(
                error_response(protocol, 403, self.policy.refusal(call.model), "model_not_allowed"),
                "model",
            )
        use = provider_tools(call.endpoint, body, agent_headers(request), self.policy.allowed_tools)
        if use is not None:
            return call.refuse(
                error_response(protocol, 400, use.message(), "provider_tool_not_allowed"), "tool"
            )
        budget = self.policy.budget_tokens
        try:
            prepared = prepare_request(
                call.endpoint, body, output_cap=None if budget is None else DEFAULT_OUTPUT_CAP
            )
        except RequestError as exc:
            return call.refuse(
                error_response(protocol, 400, str(exc), "bad_request"), "bad_request"
            )
        if budget is None or prepared.free:
            return prepared, 0
        if not prepared.bounded_input or prepared.max_output is None:
            return prepared, budget  # it may cost anything: it goes alone
        return prepared, len(call.request) + prepared.max_output

    async def _admit(self, call: GatewayCall, reservation: int) -> web.Response | None:
        """Wait until the budget has room for the call's reservation (None: go), or the
        429 once the budget is used."""
        assert self._settled is not None
        async with self._settled:
            while (admission := self.ledger.admit(reservation)) == "wait":
                await self._settled.wait()
        if admission == "go":
            return None
        return call.refuse(
            error_response(
                call.protocol,
                429,
                self.policy.budget_message(self.ledger.used()),
                "model_token_budget_exceeded",
            ),
            "budget",
        )

    async def _settle(self, call: GatewayCall, reservation: int) -> None:
        """The call's tokens in the account, its reservation given back, waiters woken."""
        assert self._settled is not None
        counted = call.reached  # the upstream answered: it may have worked for it
        if not counted or call.endpoint in FREE_ENDPOINTS:
            tokens_in = tokens_out = 0
        elif call.count is not None:
            call.usage_source = "upstream"
            call.tokens = call.count
            tokens_in, tokens_out = call.count.tokens_in, call.count.tokens_out
        else:
            # An answer whose usage cannot be read is still metered: never 0.
            call.usage_source, call.tokens = "estimated", estimate(call.request, call.response)
            tokens_in, tokens_out = call.tokens.tokens_in, call.tokens.tokens_out
        async with self._settled:
            self.ledger.settle(
                reservation,
                call.model,
                tokens_in,
                tokens_out,
                estimated=call.usage_source == "estimated",
                counted=counted,
            )
            self._settled.notify_all()
