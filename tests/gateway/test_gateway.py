"""The model gateway in process, driven by the official ``openai`` and ``anthropic`` SDKs
unchanged, in front of a scripted upstream on loopback: forwarding (tool calls, streams),
token counting, the allow-list, the budget, the key, and the transcript it records."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import anthropic
import openai
import pytest
from gateway_helpers import MODEL, RUN_ID, Start
from scripted_upstream import UPSTREAM_KEY, ToolCall, Turn

from ale_robotics.gateway import ModelGateway
from ale_robotics.gateway.relay import serve
from ale_robotics.trajectory import verified_events
from ale_robotics.trajectory.transcript import MODEL_CALL_EVENT_KIND, check_transcript

WRITE = ToolCall("write_file", {"path": "a.py", "content": "print(1)\n"})


def _openai(gateway: ModelGateway, key: str | None = None) -> openai.OpenAI:
    env = gateway.agent_env(f"http://127.0.0.1:{gateway.tcp_port}")
    return openai.OpenAI(
        base_url=env["OPENAI_BASE_URL"], api_key=key or env["OPENAI_API_KEY"], max_retries=2
    )


def _anthropic(gateway: ModelGateway) -> anthropic.Anthropic:
    env = gateway.agent_env(f"http://127.0.0.1:{gateway.tcp_port}")
    return anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=2
    )


def _events(gateway: ModelGateway) -> list[dict[str, object]]:
    report, events = verified_events(gateway.recorder.trajectory.path)  # type: ignore[union-attr]
    assert report.ok, report.reason
    assert events is not None
    return [e.payload for e in events if e.kind == MODEL_CALL_EVENT_KIND]


def test_openai_chat_tool_call_is_forwarded_counted_and_recorded(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(tool_calls=(WRITE,), tokens_in=120, tokens_out=30)])
    client = _openai(gateway)
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "write a.py"}]
    )
    (call,) = r.choices[0].message.tool_calls or []
    assert call.function.name == "write_file"
    assert json.loads(call.function.arguments) == WRITE.arguments
    assert r.usage is not None and r.usage.prompt_tokens == 120
    # the upstream got the operator's key, never the agent's
    (got,) = upstream.received
    assert got.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert gateway.token not in json.dumps(got.headers)
    usage = gateway.usage()
    assert (usage.calls, usage.tokens_in, usage.tokens_out) == (1, 120, 30)
    assert usage.per_model[MODEL].calls == 1
    (event,) = _events(gateway)
    assert event["tokens_in"] == 120 and event["tokens_out"] == 30 and event["refused"] is None
    assert event["model"] == MODEL and event["endpoint"] == "/v1/chat/completions"
    line = json.loads(gateway.transcript.read_text())
    assert json.loads(line["request"])["messages"][0]["content"] == "write a.py"
    assert json.loads(line["response"])["choices"][0]["message"]["tool_calls"]


def test_openai_stream_gets_usage_injected_and_passes_through(start_gateway: Start) -> None:
    gateway, upstream = start_gateway(
        [Turn(text="hello world", tool_calls=(WRITE,), tokens_in=50, tokens_out=7)]
    )
    stream = _openai(gateway).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text, args, usage = "", "", None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                args += tc.function.arguments or "" if tc.function else ""
    assert text == "hello world"
    assert json.loads(args) == WRITE.arguments
    assert usage is not None and usage.completion_tokens == 7
    # injected for the count; the agent's own request did not ask for it
    assert upstream.received[0].body["stream_options"] == {"include_usage": True}
    (event,) = _events(gateway)
    assert event["stream"] is True and (event["tokens_in"], event["tokens_out"]) == (50, 7)
    line = json.loads(gateway.transcript.read_text())
    assert "stream_options" not in json.loads(line["request"])  # what the agent sent
    assert line["response"].endswith("data: [DONE]\n\n")


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_with_tool_use(start_gateway: Start, stream: bool) -> None:
    gateway, upstream = start_gateway([Turn(text="ok", tool_calls=(WRITE,), tokens_in=80)])
    client = _anthropic(gateway)
    kwargs = {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "write a.py"}],
    }
    if stream:
        with client.messages.stream(**kwargs) as s:  # type: ignore[arg-type]
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)  # type: ignore[arg-type]
    tool = [b for b in message.content if b.type == "tool_use"]
    assert tool and tool[0].input == WRITE.arguments
    assert upstream.received[0].headers["x-api-key"] == UPSTREAM_KEY
    assert "authorization" not in {k.lower() for k in upstream.received[0].headers}
    usage = gateway.usage()
    assert (usage.tokens_in, usage.tokens_out) == (80, 20)
    (event,) = _events(gateway)
    assert event["protocol"] == "anthropic" and event["stream"] is stream


def test_responses_api_is_counted(start_gateway: Start) -> None:
    gateway, _ = start_gateway([Turn(text="done", tokens_in=11, tokens_out=3)])
    r = _openai(gateway).responses.create(model=MODEL, input="hi")
    assert r.output_text == "done"
    assert (gateway.usage().tokens_in, gateway.usage().tokens_out) == (11, 3)


def test_a_disallowed_model_is_refused_naming_the_allow_list(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="x")], models=(MODEL, "other-model"))
    with pytest.raises(openai.PermissionDeniedError) as oe:
        _openai(gateway).chat.completions.create(
            model="gpt-big", messages=[{"role": "user", "content": "hi"}]
        )
    assert oe.value.status_code == 403
    assert "'gpt-big' is not allowed" in str(oe.value) and "scripted-model, other-model" in str(
        oe.value
    )
    with pytest.raises(anthropic.PermissionDeniedError) as ae:
        _anthropic(gateway).messages.create(
            model="claude-big", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert "allowed: scripted-model, other-model" in str(ae.value)
    assert upstream.received == []  # nothing went upstream, and no retry came
    usage = gateway.usage()
    assert (usage.calls, usage.refused_calls) == (0, 2)
    assert [e["refused"] for e in _events(gateway)] == ["model", "model"]
    # /v1/models lists the allow-list, in each SDK's shape
    assert [m.id for m in _openai(gateway).models.list()] == [MODEL, "other-model"]
    assert [m.id for m in _anthropic(gateway).models.list()] == [MODEL, "other-model"]


def test_the_budget_refuses_with_429_once_used(start_gateway: Start) -> None:
    turns = [Turn(text=str(i), tokens_in=100, tokens_out=20) for i in range(5)]
    gateway, upstream = start_gateway(turns, budget=200)
    client = _openai(gateway)
    messages = [{"role": "user", "content": "go"}]
    client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as oe:  # 240 >= 200: refused, not retried
        client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    assert "model token budget of 200 used" in str(oe.value)
    with pytest.raises(anthropic.RateLimitError) as ae:
        _anthropic(gateway).messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "go"}]
        )
    assert "model token budget of 200 used" in str(ae.value)
    assert len(upstream.received) == 2
    usage = gateway.usage()
    assert (usage.calls, usage.refused_calls, usage.tokens) == (2, 2, 240)
    assert usage.budget_exhausted
    assert usage.summary() == "model: 2 calls, 2 refused, 240 tokens of 200 (budget used)"


def test_a_wrong_key_is_refused(start_gateway: Start) -> None:
    gateway, upstream = start_gateway([Turn(text="x")])
    with pytest.raises(openai.AuthenticationError):
        _openai(gateway, key="sk-guess").chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    assert upstream.received == []
    assert [e["refused"] for e in _events(gateway)] == ["auth"]


def test_an_upstream_without_usage_is_metered_by_size(start_gateway: Start) -> None:
    gateway, _ = start_gateway([Turn(text="x" * 400, usage=False)])
    _openai(gateway).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    usage = gateway.usage()
    assert usage.estimated_calls == 1 and usage.tokens_out >= 100
    assert _events(gateway)[0]["usage_source"] == "estimated"


def test_an_unreachable_upstream_is_a_502_not_retried(start_gateway: Start) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    gateway, _ = start_gateway(upstream_url=dead)
    with pytest.raises(openai.APIStatusError) as e:
        _openai(gateway).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    assert e.value.status_code == 502
    assert [ev["refused"] for ev in _events(gateway)] == ["upstream"]


def test_the_relay_carries_the_sdk_to_the_unix_socket(start_gateway: Start) -> None:
    gateway, _ = start_gateway([Turn(text="via relay")])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, str(gateway.socket_path)), daemon=True).start()
    env = gateway.agent_env(f"http://127.0.0.1:{port}")
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "via relay"
    listener.close()


def test_the_transcript_verifies_and_an_edited_line_fails(start_gateway: Start) -> None:
    gateway, _ = start_gateway([Turn(text=f"answer {i}") for i in range(3)])
    client = _openai(gateway)
    for i in range(3):
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"question {i}"}]
        )
    traj = gateway.recorder.trajectory.path  # type: ignore[union-attr]
    report, events = verified_events(traj, expected_run_id=RUN_ID)
    assert report.ok and events is not None
    path: Path = gateway.transcript
    assert check_transcript(events, path) is None
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"answer 1", b"answer X")
    path.write_bytes(b"".join(lines))
    problem = check_transcript(events, path)
    assert problem is not None and problem.startswith("model_calls.jsonl line 2 (call 1)")
    path.write_bytes(b"".join(lines[:1] + lines[2:]))  # a line removed
    assert "line 2 (call 1)" in (check_transcript(events, path) or "")
    path.unlink()
    assert "missing" in (check_transcript(events, path) or "")
