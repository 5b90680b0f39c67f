"""What the gateway reads from the provider protocols: usage in bodies and event streams."""

from __future__ import annotations

import json

import pytest

from ale_robotics.gateway.protocols import (
    SseUsage,
    TokenCount,
    error_body,
    prepare_request,
    usage_from_body,
)


def _sse(events: list[dict[str, object]]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("cut", [1, 7, 33, 64])
def test_stream_usage_is_read_however_the_bytes_are_split(cut: int) -> None:
    anthropic_stream = (
        b"event: message_start\n"
        + _sse([{"type": "message_start", "message": {"usage": {"input_tokens": 9}}}])
        + _sse([{"type": "message_delta", "usage": {"output_tokens": 4}}])
        + _sse([{"type": "message_delta", "usage": {"output_tokens": 12}}])
    )
    sse = SseUsage("anthropic")
    for i in range(0, len(anthropic_stream), cut):
        sse.feed(anthropic_stream[i : i + cut])
    sse.close()
    assert sse.count == TokenCount(9, 12)


def test_openai_stream_usage_and_responses_completed() -> None:
    sse = SseUsage("openai")
    sse.feed(_sse([{"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}]))
    assert sse.count == TokenCount(5, 2)
    sse = SseUsage("openai")
    done = {
        "type": "response.completed",
        "response": {"usage": {"input_tokens": 3, "output_tokens": 1}},
    }
    sse.feed(_sse([{"type": "response.created", "response": {}}, done]))
    assert sse.count == TokenCount(3, 1)
    assert SseUsage("openai").count is None


def test_usage_from_bodies() -> None:
    cache = {"input_tokens": 1, "cache_read_input_tokens": 10, "output_tokens": 2}
    assert usage_from_body("anthropic", json.dumps({"usage": cache}).encode()) == TokenCount(11, 2)
    assert usage_from_body("openai", b'{"usage": {"prompt_tokens": 4}}') == TokenCount(4, 0)
    assert usage_from_body("openai", b'{"usage": null}') is None
    assert usage_from_body("openai", b"not json") is None
    assert usage_from_body("openai", b'{"usage": {"prompt_tokens": true}}') == TokenCount(0, 0)


def test_include_usage_is_set_only_on_streamed_openai_requests() -> None:
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": False}}
    assert prepare_request("/v1/chat/completions", body) == {
        **body,
        "stream_options": {"include_usage": True},
    }
    assert prepare_request("/v1/chat/completions", {"model": "m"}) is None
    assert prepare_request("/v1/messages", {"model": "m", "stream": True}) is None


def test_error_shapes() -> None:
    o = json.loads(error_body("openai", 429, "model token budget of 5 used", "x"))
    assert o["error"]["message"] == "model token budget of 5 used"
    a = json.loads(error_body("anthropic", 403, "no", "x"))
    assert a == {"type": "error", "error": {"type": "permission_error", "message": "no"}}
