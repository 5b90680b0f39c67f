"""What the gateway reads from the provider protocols: usage in bodies and event streams,
read strictly; the protocol by the path alone; what a request may cost; bodies that two
parsers could read differently."""

from __future__ import annotations

import json

import pytest

from ale_robotics.gateway.protocols import (
    DEFAULT_OUTPUT_CAP,
    RequestError,
    SseUsage,
    TokenCount,
    error_body,
    estimate,
    neutral_error_body,
    parse_body,
    prepare_request,
    protocol_of,
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
    both = b'{"usage": {"prompt_tokens": 4, "completion_tokens": 3}}'
    assert usage_from_body("openai", both) == TokenCount(4, 3)
    responses = b'{"usage": {"input_tokens": 4, "output_tokens": 3}}'
    assert usage_from_body("openai", responses, "/v1/responses") == TokenCount(4, 3)
    embedding = b'{"usage": {"prompt_tokens": 4, "total_tokens": 4}}'
    assert usage_from_body("openai", embedding, "/v1/embeddings") == TokenCount(4, 0)
    assert usage_from_body("openai", b'{"usage": null}') is None
    assert usage_from_body("openai", b"not json") is None


@pytest.mark.parametrize(
    ("protocol", "usage"),
    [
        # half a pair, or a count that is not a whole number >= 0: no usage it can read
        ("openai", {"prompt_tokens": 4}),
        ("openai", {"prompt_tokens": True, "completion_tokens": 1}),
        ("openai", {"prompt_tokens": "40", "completion_tokens": 1}),
        ("openai", {"prompt_tokens": -5, "completion_tokens": 1}),
        ("openai", {"prompt_tokens": 4.5, "completion_tokens": 1}),
        ("openai", {}),
        ("anthropic", {}),
        ("anthropic", {"input_tokens": 5}),
        ("anthropic", {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": "9"}),
        # the other protocol's fields: an OpenAI answer read on an Anthropic path
        ("anthropic", {"prompt_tokens": 10, "completion_tokens": 10}),
    ],
)
def test_a_usage_that_cannot_be_read_is_none_not_zero(
    protocol: str, usage: dict[str, object]
) -> None:
    body = json.dumps({"usage": usage}).encode()
    assert usage_from_body(protocol, body, "/v1/chat/completions") is None  # type: ignore[arg-type]


def test_an_estimate_is_never_zero() -> None:
    assert estimate(b"", b"") == TokenCount(1, 1)
    assert estimate(b"x" * 9, b"y" * 4) == TokenCount(3, 1)


def test_responses_stream_ends_other_than_completed_carry_the_usage() -> None:
    for end in ("response.incomplete", "response.failed"):
        sse = SseUsage("openai")
        event = {"type": end, "response": {"usage": {"input_tokens": 7, "output_tokens": 70}}}
        sse.feed(_sse([{"type": "response.created", "response": {}}, event]))
        assert sse.count == TokenCount(7, 70)


@pytest.mark.parametrize(
    ("path", "protocol"),
    [
        ("/v1/messages", "anthropic"),
        ("/v1/messages/count_tokens", "anthropic"),
        ("/v1/chat/completions", "openai"),
        ("/v1/responses", "openai"),
        ("/v1/messagesX", "openai"),
    ],
)
def test_the_protocol_is_the_paths(path: str, protocol: str) -> None:
    assert protocol_of(path) == protocol


def test_include_usage_is_set_only_on_streamed_openai_requests() -> None:
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": False}}
    assert prepare_request("/v1/chat/completions", body).body == {
        **body,
        "stream_options": {"include_usage": True},
    }
    assert prepare_request("/v1/chat/completions", {"model": "m"}).body is None
    assert prepare_request("/v1/messages", {"model": "m", "stream": True}).body is None


@pytest.mark.parametrize(
    ("endpoint", "field"),
    [
        ("/v1/chat/completions", "max_completion_tokens"),
        ("/v1/completions", "max_tokens"),
        ("/v1/responses", "max_output_tokens"),
        ("/v1/messages", "max_tokens"),
    ],
)
def test_a_budgeted_request_without_a_cap_gets_one(endpoint: str, field: str) -> None:
    prepared = prepare_request(endpoint, {"model": "m"}, output_cap=DEFAULT_OUTPUT_CAP)
    assert prepared.body == {"model": "m", field: DEFAULT_OUTPUT_CAP}
    assert prepared.max_output == DEFAULT_OUTPUT_CAP
    # without a budget nothing is added
    assert prepare_request(endpoint, {"model": "m"}).body is None
    # a cap of the agent's own is kept and is what the call may cost
    own = prepare_request(endpoint, {"model": "m", field: 50}, output_cap=DEFAULT_OUTPUT_CAP)
    assert own.body is None and own.max_output == 50


def test_choices_multiply_what_a_call_may_cost() -> None:
    chat = {"model": "m", "max_tokens": 10, "max_completion_tokens": 30, "n": 4}
    assert prepare_request("/v1/chat/completions", chat).max_output == 120
    legacy = {"model": "m", "max_tokens": 10, "n": 2, "best_of": 5}
    assert prepare_request("/v1/completions", legacy).max_output == 50
    assert prepare_request("/v1/embeddings", {"model": "m", "input": "x"}).max_output == 0
    free = prepare_request("/v1/messages/count_tokens", {"model": "m"})
    assert free.free and free.max_output == 0


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "max_tokens": "100000"},
        {"model": "m", "max_tokens": 1e6},
        {"model": "m", "max_tokens": True},
        {"model": "m", "max_tokens": 0},
        {"model": "m", "max_tokens": 10, "n": 129},
        {"model": "m", "max_tokens": 10, "n": "2"},
    ],
)
def test_a_cap_the_upstream_could_read_otherwise_is_refused(body: dict[str, object]) -> None:
    with pytest.raises(RequestError):
        prepare_request("/v1/chat/completions", body, output_cap=DEFAULT_OUTPUT_CAP)


def test_input_kept_by_the_provider_is_not_bounded_by_the_body() -> None:
    for field in ("previous_response_id", "conversation", "prompt"):
        body = {"model": "m", field: "resp_1"}
        assert not prepare_request("/v1/responses", body).bounded_input
    assert prepare_request("/v1/responses", {"model": "m"}).bounded_input


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"model": "a", "model": "b"}', "'model' twice"),
        (b'{"model": "a", "tools": [{"type": "function", "type": "web_search"}]}', "'type'"),
        (b'{"model": "a", "temperature": NaN}', "NaN"),
        (b'{"model": "a", "max_tokens": Infinity}', "Infinity"),
        (b"[1, 2]", "JSON object"),
        (b"\xff", "JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON object"),
    ],
)
def test_bodies_two_parsers_could_read_differently_are_refused(raw: bytes, says: str) -> None:
    with pytest.raises(RequestError, match=says):
        parse_body(raw)


def test_error_shapes() -> None:
    o = json.loads(error_body("openai", 429, "model token budget of 5 used", "x"))
    assert o["error"]["message"] == "model token budget of 5 used"
    a = json.loads(error_body("anthropic", 403, "no", "x"))
    assert a == {"type": "error", "error": {"type": "permission_error", "message": "no"}}
    n = json.loads(neutral_error_body(401, "no key", "invalid_api_key"))
    assert n["error"]["message"] == "no key" and n["error"]["code"] == "invalid_api_key"
    assert n["type"] == "error" and n["error"]["type"] == "authentication_error"
