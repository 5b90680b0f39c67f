"""The gateway against an agent that attacks it (issue 44's points 1-7), each a raw HTTP
client on loopback in front of a scripted upstream that also misbehaves (compresses,
redirects, answers slowly, omits usage):

1. a header cannot change the protocol a call is read in: the tally equals what the
   upstream reported, for every endpoint with every header combination, streamed or not,
   and a usage the gateway cannot read is estimated, never 0;
2. calls made at once cannot take the run past its budget by more than one reservation;
3. refused calls are recorded by size and SHA-256, bodies over the cap are refused, calls
   in flight are bounded, and the transcript stops at the run's disk quota;
4. provider-side tools (web search and fetch, MCP, code execution, computer use, file
   stores, content fetched by URL) and the beta headers that enable them are refused
   naming the tool, unless the operator allowed it; function tools pass;
5. a redirect is not followed, and no key reaches where it points;
6. the query string and the headers are passed from allow-lists only;
7. answers reach the SDKs decoded, whatever the upstream compressed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from gateway_helpers import MODEL, Start
from scripted_upstream import UPSTREAM_KEY, Turn

from ale_robotics.gateway import ModelGateway
from ale_robotics.gateway.protocols import DEFAULT_OUTPUT_CAP
from ale_robotics.gateway.server import MAX_BODY_BYTES, MAX_IN_FLIGHT
from ale_robotics.trajectory import verified_events
from ale_robotics.trajectory.transcript import (
    ModelCallRecord,
    check_transcript,
)

USER = [{"role": "user", "content": "hi"}]


def _url(gateway: ModelGateway, path: str) -> str:
    return f"http://127.0.0.1:{gateway.tcp_port}{path}"


def _post(
    gateway: ModelGateway,
    path: str,
    body: dict[str, Any] | bytes,
    headers: dict[str, str] | None = None,
    *,
    key: str | None = "bearer",
) -> httpx.Response:
    """A raw POST as an attacker sends it: ``key`` 'bearer', 'x-api-key', or None."""
    sent = dict(headers or {})
    if key == "bearer":
        sent["authorization"] = f"Bearer {gateway.token}"
    elif key == "x-api-key":
        sent["x-api-key"] = gateway.token
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(_url(gateway, path), content=data, headers=sent, timeout=60)


def _records(gateway: ModelGateway) -> list[ModelCallRecord]:
    lines = gateway.transcript.read_bytes().splitlines()
    return [ModelCallRecord.model_validate_json(line) for line in lines]


def _verified(gateway: ModelGateway) -> None:
    report, events = verified_events(gateway.recorder.trajectory.path)  # type: ignore[union-attr]
    assert report.ok and events is not None
    assert check_transcript(events, gateway.transcript) is None


# -- 1. the protocol is the path's; the tally is the upstream's --------------------------------

_BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": MODEL, "messages": USER, "max_tokens": 100},
    "/v1/completions": {"model": MODEL, "prompt": "hi", "max_tokens": 100},
    "/v1/responses": {"model": MODEL, "input": "hi", "max_output_tokens": 100},
    "/v1/embeddings": {"model": MODEL, "input": "hi"},
    "/v1/messages": {"model": MODEL, "messages": USER, "max_tokens": 100},
    "/v1/messages/count_tokens": {"model": MODEL, "messages": USER},
}
_STREAMS = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"}
_HEADERS: dict[str, dict[str, str]] = {
    "none": {},
    "anthropic-version": {"anthropic-version": "2023-06-01"},
    "openai-beta": {"openai-beta": "responses=v1"},
    "both-protocols": {"anthropic-version": "2023-06-01", "openai-beta": "assistants=v2"},
    "harmless-beta": {"anthropic-beta": "prompt-caching-2024-07-31"},
}
_CASES = [
    pytest.param(path, stream, headers, key, id=f"{path}-{'sse' if stream else 'json'}-{h}-{key}")
    for path in _BODIES
    for stream in ((False, True) if path in _STREAMS else (False,))
    for h, headers in _HEADERS.items()
    for key in ("bearer", "x-api-key")
]


@pytest.mark.parametrize(("path", "stream", "headers", "key"), _CASES)
def test_the_tally_is_what_the_upstream_reported_whatever_the_headers(
    start_gateway: Start, path: str, stream: bool, headers: dict[str, str], key: str
) -> None:
    gateway, upstream = start_gateway([Turn(text="ok", tokens_in=1000, tokens_out=7)] * 2)
    body = {**_BODIES[path], **({"stream": True} if stream else {})}
    for _ in range(2):
        r = _post(gateway, path, body, headers, key=key)
        assert r.status_code == 200, r.text
    usage = gateway.usage()
    reported_in = sum(i for i, _ in upstream.reported)
    reported_out = sum(o for _, o in upstream.reported)
    assert (usage.tokens_in, usage.tokens_out) == (reported_in, reported_out)
    if path != "/v1/messages/count_tokens":  # the one endpoint that is not billed
        assert reported_in == 2000 and usage.estimated_calls == 0
    # the upstream got the operator's key where its protocol reads it, never the agent's
    for got in upstream.received:
        sent = {k.lower(): v for k, v in got.headers.items()}
        if path.startswith("/v1/messages"):
            assert sent["x-api-key"] == UPSTREAM_KEY and "authorization" not in sent
        else:
            assert sent["authorization"] == f"Bearer {UPSTREAM_KEY}" and "x-api-key" not in sent
    _verified(gateway)


def test_the_issues_attack_chat_with_an_anthropic_header_counts_every_token(
    start_gateway: Start,
) -> None:
    """30 chat calls with ``anthropic-version`` on a 50,000-token budget: the gateway used to
    read them as Anthropic and count 0 each (122,000 served, 62,000 recorded)."""
    gateway, upstream = start_gateway(
        [Turn(text="ok", tokens_in=1000, tokens_out=1000)] * 30, budget=50_000
    )
    statuses = [
        _post(
            gateway,
            "/v1/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": "x" * 4000}],
             "max_tokens": 1000},
            {"anthropic-version": "2023-06-01"},
        ).status_code
        for _ in range(30)
    ]  # fmt: skip
    served = sum(i + o for i, o in upstream.reported)
    assert gateway.usage().tokens == served
    assert statuses.count(200) == 25 and statuses[25:] == [429] * 5
    assert served == 50_000


@pytest.mark.parametrize(
    ("path", "stream"),
    [
        (path, stream)
        for path in _BODIES
        if path != "/v1/messages/count_tokens"
        for stream in ((False, True) if path in _STREAMS else (False,))
    ],
)
def test_an_answer_without_usage_is_estimated_never_zero(
    start_gateway: Start, path: str, stream: bool
) -> None:
    gateway, _ = start_gateway([Turn(text="y" * 40, usage=False)])
    r = _post(gateway, path, {**_BODIES[path], **({"stream": True} if stream else {})})
    assert r.status_code == 200
    usage = gateway.usage()
    assert usage.estimated_calls == 1 and usage.tokens_in >= 1 and usage.tokens_out >= 1
    (record,) = _records(gateway)
    assert record.usage_source == "estimated"


# -- 2. calls at once ----------------------------------------------------------------------------


def test_concurrent_calls_cannot_overrun_the_budget(start_gateway: Start) -> None:
    """30 calls at once against a slow upstream, each able to cost 1,000 + 1,000 tokens,
    on a 10,000-token budget (before: every one was let through, 60,000 served)."""
    content = "x" * 1200  # the body's bytes bound its 1,000 input tokens
    turns = [Turn(text="ok", tokens_in=1000, tokens_out=1000)] * 30
    gateway, upstream = start_gateway(turns, budget=10_000)
    upstream.delay_s = 0.3
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 1000}
    reservation = len(json.dumps(body)) + 1000

    async def burst() -> list[int]:
        async with httpx.AsyncClient(timeout=120) as client:
            calls = [
                client.post(
                    _url(gateway, "/v1/chat/completions"),
                    json=body,
                    headers={"authorization": f"Bearer {gateway.token}"},
                )
                for _ in range(30)
            ]
            return [r.status_code for r in await asyncio.gather(*calls)]

    statuses = asyncio.run(burst())
    served = sum(i + o for i, o in upstream.reported)
    assert served <= 10_000 + reservation
    assert served == gateway.usage().tokens
    assert statuses.count(200) == served // 2000
    # the rest: refused at the budget, or past the calls in flight (to retry)
    assert set(statuses) <= {200, 429}
    assert upstream.most_in_flight <= MAX_IN_FLIGHT
    refusals = gateway.usage().refusals
    assert refusals.get("budget", 0) + refusals.get("busy", 0) == 30 - statuses.count(200)


def test_a_call_whose_input_the_provider_keeps_goes_alone(start_gateway: Start) -> None:
    """``previous_response_id`` brings input the body does not bound: the call reserves the
    whole budget, so no other call is let through while it is in flight."""
    gateway, upstream = start_gateway(
        [Turn(text="ok", tokens_in=10, tokens_out=10)] * 3, budget=100_000
    )
    upstream.delay_s = 0.4
    body = {"model": MODEL, "input": "go on", "previous_response_id": "resp_1"}

    def call() -> None:
        assert _post(gateway, "/v1/responses", body).status_code == 200

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert upstream.most_in_flight == 1
    assert gateway.usage().calls == 3


def test_a_budgeted_call_without_a_cap_gets_the_documented_one(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")] * 2, budget=1_000_000)
    _post(gateway, "/v1/responses", {"model": MODEL, "input": "hi"})
    _post(gateway, "/v1/messages", {"model": MODEL, "messages": USER})
    assert upstream.received[0].body["max_output_tokens"] == DEFAULT_OUTPUT_CAP
    assert upstream.received[1].body["max_tokens"] == DEFAULT_OUTPUT_CAP
    r = _post(
        gateway, "/v1/chat/completions", {"model": MODEL, "messages": USER, "max_tokens": "9e9"}
    )
    assert r.status_code == 400 and "max_tokens must be a whole number" in r.text


# -- 3. the host's disk and memory ---------------------------------------------------------------


def test_refused_calls_are_recorded_by_size_and_hash_not_body(start_gateway: Start) -> None:
    """12 refused 8 MiB bodies (wrong key, a model off the list) made a 100 MB transcript."""
    gateway, upstream = start_gateway()
    big = json.dumps({"model": "not-allowed", "messages": USER, "pad": "z" * (8 << 20)}).encode()
    for i in range(12):
        r = _post(gateway, "/v1/chat/completions", big, key="bearer" if i % 2 else None)
        assert r.status_code in (401, 403)
    assert gateway.transcript.stat().st_size < 12 * 2048
    records = _records(gateway)
    assert {r.refused for r in records} == {"auth", "model"}
    for record in records:
        assert record.request is None and record.request_bytes == len(big)
        assert record.request_sha256 == hashlib.sha256(big).hexdigest()
    assert upstream.received == []
    _verified(gateway)


def test_a_body_over_the_cap_is_refused_unread(start_gateway: Start) -> None:
    gateway, upstream = start_gateway()
    huge = b'{"model": "' + MODEL.encode() + b'", "pad": "' + b"z" * MAX_BODY_BYTES + b'"}'
    r = _post(gateway, "/v1/chat/completions", huge)
    assert r.status_code == 413 and "16 MiB" in r.text
    (record,) = _records(gateway)
    assert record.refused == "too_large" and record.request is None
    assert MAX_BODY_BYTES < (record.request_bytes or 0) < len(huge) + 1
    assert upstream.received == []


def test_calls_in_flight_are_bounded_and_the_rest_told_to_retry(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")] * 20)
    upstream.delay_s = 1.0
    body = {"model": MODEL, "messages": USER}

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            calls = [
                client.post(
                    _url(gateway, "/v1/chat/completions"),
                    json=body,
                    headers={"authorization": f"Bearer {gateway.token}"},
                )
                for _ in range(MAX_IN_FLIGHT + 4)
            ]
            return list(await asyncio.gather(*calls))

    answers = asyncio.run(burst())
    busy = [r for r in answers if r.status_code == 429]
    assert len(busy) == 4 and upstream.most_in_flight == MAX_IN_FLIGHT
    assert all(r.headers["x-should-retry"] == "true" and r.headers["retry-after"] for r in busy)
    assert "more than 8 model calls at once" in busy[0].json()["error"]["message"]


def test_the_transcript_stops_at_the_disk_quota(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")] * 10, quota=200_000)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "q" * 60_000}]}
    statuses = [_post(gateway, "/v1/chat/completions", body).status_code for _ in range(6)]
    assert statuses[:3] == [200] * 3 and 507 in statuses
    assert gateway.quota_reached.is_set()
    assert len(upstream.received) == 3
    assert gateway.stored_bytes() == gateway.transcript.stat().st_size
    assert gateway.transcript.stat().st_size <= 200_000
    assert gateway.quota_demand > 200_000


# -- 4. provider-side tools ----------------------------------------------------------------------

_FUNCTION = {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}
_REFUSED: list[tuple[str, dict[str, Any], dict[str, str], str]] = [
    ("/v1/responses", {"tools": [{"type": "web_search_preview"}]}, {}, "web_search"),
    ("/v1/responses", {"tools": [{"type": "web_search"}]}, {}, "web_search"),
    (
        "/v1/responses",
        {"tools": [{"type": "mcp", "server_url": "https://x", "server_label": "x"}]},
        {},
        "mcp",
    ),
    (
        "/v1/responses",
        {"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]},
        {},
        "code_execution",
    ),
    (
        "/v1/responses",
        {"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]},
        {},
        "file_search",
    ),
    ("/v1/responses", {"tools": [{"type": "computer_use_preview"}]}, {}, "computer_use"),
    ("/v1/responses", {"tools": [{"type": "image_generation"}]}, {}, "image_generation"),
    ("/v1/responses", {"tools": [{"type": "brand_new_server_tool"}]}, {}, "brand_new_server_tool"),
    ("/v1/responses", {"background": True}, {}, "background"),
    (
        "/v1/responses",
        {
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}],
                }
            ]
        },
        {},
        "remote_content",
    ),
    (
        "/v1/responses",
        {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]},
        {},
        "file_search",
    ),
    ("/v1/chat/completions", {"web_search_options": {}}, {}, "web_search"),
    (
        "/v1/chat/completions",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "HTTP://example.com/a.png"}}
                    ],
                }
            ]
        },
        {},
        "remote_content",
    ),
    (
        "/v1/messages",
        {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        {},
        "web_search",
    ),
    (
        "/v1/messages",
        {"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
        {},
        "web_fetch",
    ),
    (
        "/v1/messages",
        {"tools": [{"type": "code_execution_20250825", "name": "code_execution"}]},
        {},
        "code_execution",
    ),
    (
        "/v1/messages",
        {"tools": [{"type": "computer_20250124", "name": "computer"}]},
        {},
        "computer_use",
    ),
    (
        "/v1/messages",
        {"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]},
        {},
        "mcp",
    ),
    ("/v1/messages", {"container": "container_1"}, {}, "code_execution"),
    (
        "/v1/messages",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "url", "url": "https://example.com/a.pdf"},
                        }
                    ],
                }
            ]
        },
        {},
        "remote_content",
    ),
    (
        "/v1/messages",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}],
                }
            ]
        },
        {},
        "file_search",
    ),
    ("/v1/messages", {}, {"anthropic-beta": "mcp-client-2025-04-04"}, "mcp"),
    (
        "/v1/messages",
        {},
        {"anthropic-beta": "prompt-caching-2024-07-31, web-fetch-2025-09-10"},
        "web_fetch",
    ),
    ("/v1/messages", {}, {"anthropic-beta": "code-execution-2025-08-25"}, "code_execution"),
    ("/v1/messages", {}, {"anthropic-beta": "files-api-2025-04-14"}, "file_search"),
]


def _tool_body(path: str, extra: dict[str, Any]) -> dict[str, Any]:
    base = {k: v for k, v in _BODIES[path].items() if k not in extra}
    return {**base, **extra}


@pytest.mark.parametrize(("path", "extra", "headers", "name"), _REFUSED)
def test_provider_side_tools_are_refused_naming_them(
    start_gateway: Start, path: str, extra: dict[str, Any], headers: dict[str, str], name: str
) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")])
    r = _post(gateway, path, _tool_body(path, extra), headers)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert f"provider-side tool {name!r}" in message and f"--model-allow-tool {name}" in message
    assert upstream.received == []
    assert _records(gateway)[0].refused == "tool"


@pytest.mark.parametrize(("path", "extra", "headers", "name"), _REFUSED)
def test_a_tool_the_operator_allows_passes(
    start_gateway: Start, path: str, extra: dict[str, Any], headers: dict[str, str], name: str
) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")], tools=[name])
    r = _post(gateway, path, _tool_body(path, extra), headers)
    assert r.status_code == 200, r.text
    assert len(upstream.received) == 1
    assert gateway.usage().tools_allowed == [name]


def test_a_beta_header_sent_twice_is_checked_whole(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")])
    headers = [
        ("authorization", f"Bearer {gateway.token}"),
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("anthropic-beta", "mcp-client-2025-04-04"),
    ]
    r = httpx.post(
        _url(gateway, "/v1/messages"),
        content=json.dumps(_BODIES["/v1/messages"]).encode(),
        headers=headers,
    )
    assert r.status_code == 400 and "'mcp'" in r.text
    assert upstream.received == []


def test_a_key_given_twice_is_refused_not_read_one_way(start_gateway: Start) -> None:
    """A parser that keeps the first of two keys would see the web search this one hid."""
    gateway, upstream = start_gateway([Turn(text="ok")])
    raw = (
        b'{"model": "' + MODEL.encode() + b'", "input": "hi", '
        b'"tools": [{"type": "web_search"}], "tools": [{"type": "function", "name": "f"}]}'
    )
    r = _post(gateway, "/v1/responses", raw)
    assert r.status_code == 400 and "'tools' twice" in r.text
    assert upstream.received == []


def test_function_tools_and_inline_content_pass(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")] * 3)
    chat = {
        "model": MODEL,
        "tools": [_FUNCTION],
        "messages": [
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]},
        ],
    }  # fmt: skip
    messages = {
        "model": MODEL,
        "max_tokens": 10,
        "tools": [
            {"name": "fetch", "input_schema": {"type": "object", "properties": {"url": {}}}},
            {"type": "bash_20250124", "name": "bash"},
            {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        ],
        "messages": [
            {"role": "user", "content": "get it"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "fetch",
                 "input": {"url": "https://example.com/the-agents-own-tool"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},  # noqa: E501
        ],
    }  # fmt: skip
    responses = {"model": MODEL, "input": "hi", "tools": [{"type": "function", "name": "f"}]}
    assert _post(gateway, "/v1/chat/completions", chat).status_code == 200
    assert _post(gateway, "/v1/messages", messages).status_code == 200
    assert _post(gateway, "/v1/responses", responses).status_code == 200
    assert len(upstream.received) == 3


# -- 5. and 6. redirects, query strings, headers -------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback port that records whatever reaches it."""
    got: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    got.append(conn.recv(65536))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], got
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_a_redirect_is_not_followed_and_no_key_reaches_its_target(
    start_gateway: Start, listener: tuple[int, list[bytes]], path: str
) -> None:
    port, got = listener
    gateway, upstream = start_gateway([Turn(text="ok")])
    upstream.redirect_to = f"http://127.0.0.1:{port}"
    r = _post(gateway, path, _BODIES[path])
    assert r.status_code == 502 and "redirect" in r.json()["error"]["message"]
    assert "location" not in r.headers and UPSTREAM_KEY not in r.text
    assert got == []
    assert _records(gateway)[0].refused == "upstream"
    assert gateway.usage().calls == 0  # nothing was served


def test_only_allowed_query_parameters_go_upstream(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")] * 2)
    _post(gateway, "/v1/messages?beta=true&model=other&api-version=9", _BODIES["/v1/messages"])
    _post(gateway, "/v1/chat/completions?api-version=9&x=1", _BODIES["/v1/chat/completions"])
    assert [got.query for got in upstream.received] == ["beta=true", ""]


def test_session_headers_pass_and_credentials_never(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")])
    session = {
        "user-agent": "claude-cli/2.1.0 (external, cli)",
        "x-app": "cli",
        "x-claude-code-session-id": "s-1",
        "session_id": "s-2",
        "anthropic-dangerous-direct-browser-access": "true",
        "x-stainless-lang": "js",
    }
    credentials = {
        "cookie": "session=agent",
        "openai-organization": "org-agent",
        "openai-project": "proj-agent",
        "proxy-authorization": "Basic YWdlbnQ=",
        "x-goog-api-key": "agent-google-key",
        "api-key": "agent-azure-key",
        "x-forwarded-for": "10.0.0.1",
        "accept-encoding": "br",
    }
    _post(gateway, "/v1/messages", _BODIES["/v1/messages"], {**session, **credentials})
    (got,) = upstream.received
    sent = {k.lower(): v for k, v in got.headers.items()}
    for name, value in session.items():
        assert sent[name] == value
    for name in credentials:
        assert name not in sent or name == "accept-encoding"
    assert sent["accept-encoding"] == "identity"
    assert sent["x-api-key"] == UPSTREAM_KEY and gateway.token not in json.dumps(sent)


# -- 7. compressed answers -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["gzip", "deflate"])
@pytest.mark.parametrize("stream", [False, True])
def test_compressed_answers_reach_the_sdks_decoded_and_counted(
    start_gateway: Start, how: str, stream: bool
) -> None:
    gateway, upstream = start_gateway([Turn(text="decoded", tokens_in=31, tokens_out=5)] * 3)
    upstream.compress = how
    env = gateway.agent_env(f"http://127.0.0.1:{gateway.tcp_port}")
    oa = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
    an = anthropic.Anthropic(base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"])
    if stream:
        text = "".join(
            c.choices[0].delta.content or ""
            for c in oa.chat.completions.create(model=MODEL, messages=USER, stream=True)  # type: ignore[arg-type]
            if c.choices
        )
        with an.messages.stream(model=MODEL, max_tokens=10, messages=USER) as s:  # type: ignore[arg-type]
            message = s.get_final_message()
        events = list(oa.responses.create(model=MODEL, input="hi", stream=True))
        assert events[-1].response.output_text == "decoded"  # type: ignore[union-attr]
    else:
        chat = oa.chat.completions.create(model=MODEL, messages=USER)  # type: ignore[arg-type]
        text = chat.choices[0].message.content or ""
        message = an.messages.create(model=MODEL, max_tokens=10, messages=USER)  # type: ignore[arg-type]
        assert oa.responses.create(model=MODEL, input="hi").output_text == "decoded"
    assert text == "decoded"
    assert message.content[0].text == "decoded"  # type: ignore[union-attr]
    usage = gateway.usage()
    assert (usage.tokens_in, usage.tokens_out, usage.estimated_calls) == (93, 15, 0)
    assert all(r.usage_source == "upstream" for r in _records(gateway))
    _verified(gateway)


def test_an_encoding_the_gateway_cannot_decode_is_a_502(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")])
    upstream.compress = "br"  # scripted: compressed with nothing; named br
    r = _post(gateway, "/v1/chat/completions", _BODIES["/v1/chat/completions"])
    assert r.status_code == 502 and "content-encoding 'br'" in r.text
    assert gateway.usage().calls == 1  # the upstream answered: it is counted, estimated
    assert gateway.usage().estimated_calls == 1
