"""What the gateway answers so that real agent software works unchanged (issue 45), each
case measured with the real client (docs/agent-software-notes.md) and pinned here with
raw HTTP in front of the scripted upstream:

* Codex's Responses WebSocket upgrade gets 426, on which it falls back to HTTP at once;
* Codex (``originator: codex_*``) gets its refusals as 400s, the one status whose reason it
  prints; every other client keeps the protocol's own status (429 for the budget);
* a missing key and a wrong key are told apart;
* Codex's ``namespace`` tool (a group of function tools) passes, one hiding a provider-side
  tool does not; its session headers reach the upstream;
* the agent gets the variable Codex's built-in provider reads its key from.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from gateway_helpers import MODEL, Start
from scripted_upstream import Turn

from ale_robotics.gateway import ModelGateway

CODEX = {"originator": "codex_exec", "user-agent": "codex_exec/0.171.0"}
RESPONSES = {"model": MODEL, "input": "hi", "max_output_tokens": 50}


def _post(
    gateway: ModelGateway,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    path: str = "/v1/responses",
    key: str | None = None,
) -> httpx.Response:
    sent = {"authorization": f"Bearer {key or gateway.token}", **(headers or {})}
    return httpx.post(
        f"http://127.0.0.1:{gateway.tcp_port}{path}", json=body, headers=sent, timeout=60
    )


def test_a_websocket_upgrade_gets_426(start_gateway: Start) -> None:
    gateway, upstream = start_gateway()
    r = httpx.get(
        f"http://127.0.0.1:{gateway.tcp_port}/v1/responses",
        headers={
            "connection": "Upgrade",
            "upgrade": "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
            "authorization": f"Bearer {gateway.token}",
            **CODEX,
        },
    )
    assert r.status_code == 426
    assert "over HTTP only" in r.json()["error"]["message"]
    assert upstream.received == []


@pytest.mark.parametrize(
    ("setup", "body", "key", "status", "says"),
    [
        ("budget", RESPONSES, None, 429, "model token budget of 10 used"),
        ("none", {**RESPONSES, "model": "gpt-other"}, None, 403, "'gpt-other' is not allowed"),
        ("none", RESPONSES, "sk-wrong", 401, "not the run's model gateway key"),
        ("none", {**RESPONSES, "tools": [{"type": "web_search"}]}, None, 400, "'web_search'"),
    ],
)
def test_codex_gets_its_refusals_as_400s_and_others_keep_the_status(
    start_gateway: Start,
    setup: str,
    body: dict[str, Any],
    key: str | None,
    status: int,
    says: str,
) -> None:
    gateway, _ = start_gateway(
        [Turn(text="ok", tokens_in=10, tokens_out=10)] * 2, budget=10 if setup == "budget" else None
    )
    if setup == "budget":
        assert _post(gateway, RESPONSES).status_code == 200  # 20 tokens: the budget is used
    sdk = _post(gateway, body, key=key)
    codex = _post(gateway, body, CODEX, key=key)
    assert sdk.status_code == status and says in sdk.json()["error"]["message"]
    assert codex.status_code == 400 and says in codex.json()["error"]["message"]
    assert codex.headers["x-should-retry"] == "false"


def test_a_missing_key_is_told_from_a_wrong_one(start_gateway: Start) -> None:
    gateway, _ = start_gateway()
    url = f"http://127.0.0.1:{gateway.tcp_port}/v1/messages"
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    missing = httpx.post(url, json=body)
    wrong = httpx.post(url, json=body, headers={"x-api-key": "sk-ant-guess"})
    assert missing.status_code == wrong.status_code == 401
    assert "no API key was sent" in missing.json()["error"]["message"]
    assert "not the run's model gateway key" in wrong.json()["error"]["message"]


def test_codex_namespace_of_functions_passes_and_one_hiding_a_server_tool_does_not(
    start_gateway: Start,
) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")] * 2)
    function = {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}
    group = {"type": "namespace", "name": "multi_agent_v1", "tools": [function]}
    assert _post(gateway, {**RESPONSES, "tools": [group]}, CODEX).status_code == 200
    hiding = {**group, "tools": [function, {"type": "web_search"}]}
    r = _post(gateway, {**RESPONSES, "tools": [hiding]}, CODEX)
    assert r.status_code == 400 and "'web_search'" in r.text
    assert len(upstream.received) == 1


def test_codex_session_headers_reach_the_upstream(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="ok")])
    sent = {
        **CODEX,
        "session-id": "s-1",
        "thread-id": "t-1",
        "version": "0.171.0",
        "x-codex-turn-metadata": json.dumps({"turn": 1}),
        "x-codex-window-id": "w-1",
    }
    assert _post(gateway, RESPONSES, sent).status_code == 200
    got = {k.lower(): v for k, v in upstream.received[0].headers.items()}
    for name, value in sent.items():
        assert got[name] == value


def test_the_agent_gets_codexs_key_variable(start_gateway: Start) -> None:
    gateway, _ = start_gateway()
    env = gateway.agent_env("http://127.0.0.1:8765")
    assert env["CODEX_API_KEY"] == env["OPENAI_API_KEY"] == gateway.token
