"""A scripted model upstream on loopback: OpenAI- and Anthropic-compatible, no model behind it.

No model can be reached from these machines, so the gateway's tests put this server where
the operator's upstream would be. It answers each call with the next :class:`Turn` of its
script (text, or tool calls), in the protocol the call used (chat completions, legacy
completions, responses, embeddings, messages, count_tokens), streamed as server-sent events
when the request asks for it, with the turn's token counts in the usage fields (or none,
``usage=False``). It keeps every request it got (path, query, headers, body) and the usage
it reported, so tests can see what the gateway sent upstream and what it was told.

It misbehaves on request, as real upstreams and proxies do: it compresses its answers
(``compress="gzip"`` or ``"deflate"``, whatever the request's Accept-Encoding says),
answers slowly (``delay_s`` before each answer), or redirects (``redirect_to``: a 307 to
that URL).

Run it in a thread of the test (:meth:`ScriptedUpstream.start`), or as a process::

    python tests/gateway/scripted_upstream.py SCRIPT.json PORT_FILE

(``SCRIPT.json``: a list of turns as :meth:`Turn.from_json` reads them, or ``@AGENT``, the
script of :func:`submit_checkpoint_script` for that agent software; the port is written
to ``PORT_FILE`` once it listens). As a process it takes the key from ``$ALE_MODEL_API_KEY``
when that is set, the variable ``ale-robotics run`` reads the operator's key from, so one
``export`` serves both::

    export ALE_MODEL_API_KEY=sk-test-$RANDOM$RANDOM
    python tests/gateway/scripted_upstream.py SCRIPT.json /tmp/port &
    ale-robotics run td3-inverted-pendulum-v2 --agent "..." \
        --model-upstream http://127.0.0.1:$(cat /tmp/port)/v1 --model scripted-model
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import socket
import sys
import threading
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

# Drawn per test process, so that no file holds it: the sandbox probe searches every file it
# can see (a workspace under /tmp included) for the key.
UPSTREAM_KEY = "sk-upstream-" + secrets.token_hex(20)


@dataclass(frozen=True)
class ToolCall:
    """A tool call of a scripted turn. ``kind="custom"`` makes it a Responses API custom
    (freeform) tool call, as Codex's ``apply_patch`` is: its ``input`` is
    ``arguments["input"]``, a string; the other protocols have only functions."""

    name: str
    arguments: dict[str, Any]
    kind: str = "function"


@dataclass(frozen=True)
class Turn:
    """One scripted answer: ``text`` and/or ``tool_calls``, with its token counts."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tokens_in: int = 100
    tokens_out: int = 20
    usage: bool = True

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Turn:
        calls = tuple(
            ToolCall(c["name"], c["arguments"], c.get("kind", "function"))
            for c in doc.get("tool_calls", [])
        )
        return cls(
            text=doc.get("text"),
            tool_calls=calls,
            tokens_in=doc.get("tokens_in", 100),
            tokens_out=doc.get("tokens_out", 20),
            usage=doc.get("usage", True),
        )


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: str = ""


@dataclass
class ScriptedUpstream:
    """The server; :attr:`url` once started (``http://127.0.0.1:PORT``)."""

    turns: Sequence[Turn]
    key: str = UPSTREAM_KEY
    received: list[Received] = field(default_factory=list)
    reported: list[tuple[int, int]] = field(default_factory=list)
    """The usage it reported, one (input, output) per answer that reported one."""
    port: int = 0
    compress: str | None = None
    delay_s: float = 0.0
    redirect_to: str | None = None
    lenient_auth: bool = False
    """Take the key in either protocol's header on any path (as many proxies do)."""
    in_flight: int = 0
    most_in_flight: int = 0
    _next: int = 0
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- life cycle --------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        for path in (
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/responses",
            "/v1/embeddings",
            "/v1/messages",
            "/v1/messages/count_tokens",
        ):
            app.router.add_post(path, self._answer)
        return app

    def start(self) -> ScriptedUpstream:
        loop = asyncio.new_event_loop()
        self._loop = loop
        threading.Thread(target=loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(), loop).result(10)
        return self

    async def _start(self, port: int = 0) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        assert self._runner is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._loop = None

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers -----------------------------------------------------------------------------

    def _turn(self) -> Turn:
        if self._next < len(self.turns):
            turn = self.turns[self._next]
            self._next += 1
            return turn
        return Turn(text="(the script is over)")

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return await self._answer_now(request)
        finally:
            self.in_flight -= 1

    async def _answer_now(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.received.append(
            Received(request.path, dict(request.headers), body, request.query_string)
        )
        if self.redirect_to is not None:
            raise web.HTTPTemporaryRedirect(self.redirect_to + request.path)
        bearer = request.headers.get("authorization") == f"Bearer {self.key}"
        if self.lenient_auth and (bearer or request.headers.get("x-api-key") == self.key):
            pass
        elif request.path.startswith("/v1/messages"):
            if request.headers.get("x-api-key") != self.key:
                return web.json_response(
                    {"type": "error", "error": {"type": "authentication_error", "message": "key"}},
                    status=401,
                )
        elif not bearer:
            return web.json_response({"error": {"message": "bad key", "type": "auth"}}, status=401)
        if request.path == "/v1/messages/count_tokens":  # not billed: no turn, no usage
            return self._json({"input_tokens": len(json.dumps(body)) // 4})
        turn = self._turn()
        model = body.get("model", "?")
        n = next(self._ids)
        stream = body.get("stream") is True
        if turn.usage:
            self.reported.append((turn.tokens_in, turn.tokens_out))
        if request.path == "/v1/chat/completions":
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            if stream:
                if not include and turn.usage:
                    self.reported.pop()  # a stream without usage reports none
                return await self._sse(request, _chat_chunks(turn, model, n, include))
            return self._json(_chat(turn, model, n))
        if request.path == "/v1/completions":
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            if stream:
                if not include and turn.usage:
                    self.reported.pop()
                return await self._sse(request, _completion_chunks(turn, model, n, include))
            return self._json(_completion(turn, model, n))
        if request.path == "/v1/embeddings":
            if turn.usage:
                self.reported[-1] = (turn.tokens_in, 0)
            return self._json(_embedding(turn, model))
        if request.path == "/v1/responses":
            if stream:
                return await self._sse(request, _response_events(turn, model, n))
            return self._json(_response(turn, model, n))
        if stream:
            return await self._sse(request, _message_events(turn, model, n), named=True)
        return self._json(_message(turn, model, n))

    def _json(self, doc: dict[str, Any]) -> web.Response:
        data = json.dumps(doc).encode()
        if self.compress is None:
            return web.json_response(body=data)
        return web.Response(
            body=_compressed(data, self.compress),
            content_type="application/json",
            headers={"content-encoding": self.compress},
        )

    async def _sse(
        self, request: web.Request, events: list[dict[str, Any]], named: bool = False
    ) -> web.StreamResponse:
        headers = {"content-type": "text/event-stream"}
        if self.compress is not None:
            headers["content-encoding"] = self.compress
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        packer = _Packer(self.compress)
        async for event in _paced(events):
            head = f"event: {event['type']}\n" if named else ""
            await response.write(packer.pack(f"{head}data: {json.dumps(event)}\n\n".encode()))
        if not named:
            await response.write(packer.pack(b"data: [DONE]\n\n"))
        await response.write(packer.end())
        await response.write_eof()
        return response


def _compressed(data: bytes, how: str) -> bytes:
    packer = _Packer(how)
    return packer.pack(data) + packer.end()


class _Packer:
    """Compresses a body as it is written: gzip, or deflate (zlib's format, as HTTP's
    "deflate" is), flushed after each part so that a stream stays a stream."""

    def __init__(self, how: str | None) -> None:
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
        # Any other coding is named in the header but not applied (a coding the gateway
        # must refuse, whatever the bytes).
        self._z = zlib.compressobj(wbits=wbits[how]) if how in wbits else None

    def pack(self, data: bytes) -> bytes:
        if self._z is None:
            return data
        return self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)

    def end(self) -> bytes:
        return b"" if self._z is None else self._z.flush()


async def _paced(events: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for event in events:
        yield event
        await asyncio.sleep(0)


def _usage_openai(turn: Turn) -> dict[str, int]:
    return {
        "prompt_tokens": turn.tokens_in,
        "completion_tokens": turn.tokens_out,
        "total_tokens": turn.tokens_in + turn.tokens_out,
    }


def _chat(turn: Turn, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for i, c in enumerate(turn.tool_calls)
        ]
    doc: dict[str, Any] = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.tool_calls else "stop",
                "logprobs": None,
            }
        ],
    }
    if turn.usage:
        doc["usage"] = _usage_openai(turn)
    return doc


def _chat_chunks(turn: Turn, model: str, n: int, include_usage: bool) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    if turn.text:
        half = len(turn.text) // 2
        out += [chunk({"content": turn.text[:half]}), chunk({"content": turn.text[half:]})]
    for i, c in enumerate(turn.tool_calls):
        args = json.dumps(c.arguments)
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{n}_{i}",
                            "type": "function",
                            "function": {"name": c.name, "arguments": args[:5]},
                        }
                    ]
                }
            )
        )
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[5:]}}]}))
    out.append(chunk({}, "tool_calls" if turn.tool_calls else "stop"))
    if include_usage and turn.usage:
        out.append(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": _usage_openai(turn),
            }
        )
    return out


def _completion(turn: Turn, model: str, n: int) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": f"cmpl-{n}",
        "object": "text_completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "text": turn.text or "", "finish_reason": "stop"}],
    }
    if turn.usage:
        doc["usage"] = _usage_openai(turn)
    return doc


def _completion_chunks(turn: Turn, model: str, n: int, include_usage: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {**_completion(turn, model, n), "usage": None},
    ]
    if include_usage and turn.usage:
        out.append({**_completion(turn, model, n), "choices": [], "usage": _usage_openai(turn)})
    return out


def _embedding(turn: Turn, model: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": 0, "embedding": [0.0, 1.0]}],
    }
    if turn.usage:
        doc["usage"] = {"prompt_tokens": turn.tokens_in, "total_tokens": turn.tokens_in}
    return doc


def _response(turn: Turn, model: str, n: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if turn.text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for i, c in enumerate(turn.tool_calls):
        if c.kind == "custom":
            output.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{n}_{i}",
                    "call_id": f"call_{n}_{i}",
                    "name": c.name,
                    "input": str(c.arguments.get("input", "")),
                    "status": "completed",
                }
            )
            continue
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": c.name,
                "arguments": json.dumps(c.arguments),
                "status": "completed",
            }
        )
    doc: dict[str, Any] = {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if turn.usage:
        doc["usage"] = {
            "input_tokens": turn.tokens_in,
            "output_tokens": turn.tokens_out,
            "total_tokens": turn.tokens_in + turn.tokens_out,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
    return doc


def _response_events(turn: Turn, model: str, n: int) -> list[dict[str, Any]]:
    """The stream of the Responses API as OpenAI sends it: ``response.created``, each
    output item added, its parts streamed (text deltas, function-call argument deltas) and
    done, then ``response.completed``. Clients that build the turn from the items (Codex
    reads only ``response.output_item.done`` and ``response.completed``, the Agents SDK
    the items or the final response) see the same output as a non-streamed call."""
    final = _response(turn, model, n)
    created = {**final, "status": "in_progress", "output": []}
    created.pop("usage", None)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.in_progress", "response": created},
    ]
    for index, item in enumerate(final["output"]):
        events += _item_events(item, index)
    events.append({"type": "response.completed", "response": final})
    return [{**event, "sequence_number": i} for i, event in enumerate(events)]


def _item_events(item: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """One output item of a streamed response: added (empty), its parts, done (whole)."""
    at = {"output_index": index, "item_id": item["id"]}
    kind = item["type"]
    if kind == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        half = len(text) // 2
        parts: list[dict[str, Any]] = [
            {"type": "response.content_part.added", **at, "content_index": 0, "part": part},
            *(
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": d}
                for d in (text[:half], text[half:])
                if d
            ),
            {"type": "response.output_text.done", **at, "content_index": 0, "text": text},
            {
                "type": "response.content_part.done",
                **at,
                "content_index": 0,
                "part": {**part, "text": text},
            },
        ]
        empty = {**item, "status": "in_progress", "content": []}
    elif kind == "function_call":
        args = item["arguments"]
        parts = [
            {"type": "response.function_call_arguments.delta", **at, "delta": args[:5]},
            {"type": "response.function_call_arguments.delta", **at, "delta": args[5:]},
            {"type": "response.function_call_arguments.done", **at, "arguments": args},
        ]
        empty = {**item, "status": "in_progress", "arguments": ""}
    else:  # custom_tool_call
        parts = [
            {"type": "response.custom_tool_call_input.delta", **at, "delta": item["input"]},
            {"type": "response.custom_tool_call_input.done", **at, "input": item["input"]},
        ]
        empty = {**item, "status": "in_progress", "input": ""}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": empty},
        *parts,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def _message(turn: Turn, model: str, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.text is not None:
        content.append({"type": "text", "text": turn.text})
    for i, c in enumerate(turn.tool_calls):
        content.append(
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name, "input": c.arguments}
        )
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": turn.tokens_in, "output_tokens": turn.tokens_out}
        if turn.usage
        else {},
    }


def _message_events(turn: Turn, model: str, n: int) -> list[dict[str, Any]]:
    start = {**_message(turn, model, n), "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": turn.tokens_in, "output_tokens": 1} if turn.usage else {}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    index = 0
    if turn.text is not None:
        events += [
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": turn.text},
            },
            {"type": "content_block_stop", "index": index},
        ]
        index += 1
    for i, c in enumerate(turn.tool_calls):
        events += [
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": f"toolu_{n}_{i}",
                    "name": c.name,
                    "input": {},
                },
            },
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(c.arguments)},
            },
            {"type": "content_block_stop", "index": index},
        ]
        index += 1
    events += [
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": turn.tokens_out} if turn.usage else {},
        },
        {"type": "message_stop"},
    ]
    return events


# -- scripts that drive real agent software to submit the shipped checkpoint -------------

COPY_CHECKPOINT = (
    'cp "$ALE_WORKSPACE/examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"'
    ' "$ALE_SUBMISSION_DIR/policy.safetensors"'
)
"""The shell command that puts td3-inverted-pendulum-v2's shipped checkpoint in place."""
SUBMIT_AND_WAIT = 'ale-robotics submit --wait "$ALE_SUBMISSION_DIR"'
"""The shell command that submits it and waits (exit 0 once the job SUCCEEDED)."""
DONE = "Submitted the shipped checkpoint; the job succeeded."


def submit_checkpoint_script(agent: str) -> list[Turn]:
    """The turns that make ``agent`` copy the shipped checkpoint, submit it and stop: a
    model's side of a run that scores 1.018 on td3-inverted-pendulum-v2, in the tool calls
    each agent's software runs (names and arguments as each declares its tools):

    * ``claude-code``: Claude Code's ``Bash`` tool (``command``, ``description``);
    * ``codex``: Codex CLI's ``exec_command`` function (``cmd``; ``yield_time_ms`` long
      enough for the submission to end within the call);
    * ``tools``: the Python recipes' tools (``llm_agent.py``, ``openai_agents_sdk.py``,
      ``anthropic_agent.py``): ``run``, then ``submit`` and ``status`` through the SDK.

    One turn per model call: a client that makes calls of its own (a sub-agent, a title)
    takes turns from the same list.
    """
    if agent == "claude-code":
        calls = [
            ToolCall("Bash", {"command": COPY_CHECKPOINT, "description": "Copy the checkpoint"}),
            ToolCall("Bash", {"command": SUBMIT_AND_WAIT, "description": "Submit and wait"}),
        ]
    elif agent == "codex":
        calls = [
            ToolCall("exec_command", {"cmd": COPY_CHECKPOINT}),
            ToolCall("exec_command", {"cmd": SUBMIT_AND_WAIT, "yield_time_ms": 600_000}),
        ]
    elif agent == "tools":
        calls = [
            ToolCall("run", {"command": COPY_CHECKPOINT}),
            ToolCall("submit", {}),
            ToolCall("status", {"job_id": "", "wait": True}),
        ]
    else:
        raise ValueError(f"no script for {agent!r}: claude-code, codex or tools")
    return [*(Turn(tool_calls=(c,)) for c in calls), Turn(text=DONE)]


def main(argv: list[str]) -> int:
    """``SCRIPT.json PORT_FILE``, or ``@AGENT PORT_FILE`` for
    :func:`submit_checkpoint_script`'s script for AGENT (``@codex``...)."""
    script, port_file = argv[0], Path(argv[1])
    if script.startswith("@"):
        turns = submit_checkpoint_script(script[1:])
    else:
        turns = [Turn.from_json(t) for t in json.loads(Path(script).read_text())]
    upstream = ScriptedUpstream(turns, key=os.environ.get("ALE_MODEL_API_KEY") or UPSTREAM_KEY)

    async def run() -> None:
        await upstream._start()
        port_file.write_text(str(upstream.port))
        await asyncio.Event().wait()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
