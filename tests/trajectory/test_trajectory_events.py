"""The event schema, the canonical encoding and the payload rules."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta, timezone
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from trajectory_helpers import FAKE_SIG, RUN_ID

from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError
from ale_robotics.trajectory import (
    GENESIS_HASH,
    CorruptTrajectoryError,
    Event,
    EventFormatError,
    InvalidEventError,
    TornTrajectoryError,
    build_event,
    canonical_json,
    event_hash,
    format_time,
)
from ale_robotics.trajectory.events import normalize_payload, parse_json_line

TIME = "2025-01-02T03:04:05.000006Z"


def _event(**overrides: Any) -> Event:
    fields: dict[str, Any] = {
        "seq": 0,
        "prev_hash": GENESIS_HASH,
        "run_id": RUN_ID,
        "level": "harness",
        "kind": "run_started",
        "payload": {"b": 1, "a": [1.5, None]},
        "time": TIME,
    }
    return build_event(**(fields | overrides))


def test_canonical_json_is_sorted_compact_utf8() -> None:
    value = {"b": [1, 2.5, None, True], "a": {"é": "日本\n", "A": -0.0}}
    assert canonical_json(value) == '{"a":{"A":-0.0,"é":"日本\\n"},"b":[1,2.5,null,true]}'.encode()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_json_rejects_non_finite(bad: float) -> None:
    with pytest.raises(InvalidEventError, match="no canonical JSON"):
        canonical_json({"x": bad})


def test_hash_covers_every_field_but_hash() -> None:
    event = _event()
    data = event.as_dict()
    assert set(data) == {
        "v",
        "seq",
        "time",
        "run_id",
        "level",
        "kind",
        "payload",
        "prev_hash",
        "hash",
        "sig",
    }
    without = {k: v for k, v in data.items() if k != "hash"}
    assert event.hash == hashlib.sha256(canonical_json(without)).hexdigest()
    assert event_hash(data) == event.hash == event.compute_hash()


def test_line_round_trip() -> None:
    event = _event()
    line = event.to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert Event.from_line(line[:-1]) == event


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"metrics": {"mean_return": math.nan}}, "payload.metrics.mean_return is nan"),
        ({"a": [1.0, math.inf]}, r"payload.a\[1\] is inf"),
        ({"a": (1, -math.inf)}, r"payload.a\[1\] is -inf"),
    ],
)
def test_non_finite_payload_values_are_refused_with_their_path(
    payload: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidEventError, match=where):
        _event(payload=payload)


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({1: "x"}, "non-string key"),
        ({"a": {1, 2}}, "type set"),
        ({"a": object()}, "type object"),
        ({"a": b"bytes"}, "type bytes"),
        ({"a": "\ud800"}, "not valid Unicode"),
    ],
)
def test_non_json_payload_values_are_refused(payload: dict[Any, Any], needle: str) -> None:
    with pytest.raises(InvalidEventError, match=needle):
        _event(payload=payload)


def test_payload_is_normalized_and_copied() -> None:
    class Color(StrEnum):
        RED = "red"

    class Count(IntEnum):
        TWO = 2

    source: dict[str, Any] = {"c": Color.RED, "n": Count.TWO, "t": (1, 2), "b": True, "l": [1]}
    clean = normalize_payload(source)
    assert clean == {"c": "red", "n": 2, "t": [1, 2], "b": True, "l": [1]}
    assert type(clean["c"]) is str and type(clean["n"]) is int and clean["b"] is True
    event = _event(payload=source)
    source["l"].append(2)  # the caller mutating its dict later changes nothing
    assert event.payload["l"] == [1]
    assert event.compute_hash() == event.hash


def test_payload_must_be_an_object() -> None:
    with pytest.raises(InvalidEventError, match="must be a JSON object"):
        normalize_payload([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b'{"a": NaN}', "NaN"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b'{"a": 1e400}', "out of range"),
        (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
        (b'{"a": {"b": 1, "b": 1}}', "duplicate key 'b'"),
        (b"\xc3\x28", "not UTF-8"),
        (b"[]", "not a JSON object"),
        (b"{", "not JSON"),
    ],
)
def test_strict_json_parsing(raw: bytes, needle: str) -> None:
    with pytest.raises(EventFormatError, match=needle):
        parse_json_line(raw)


def _valid_dict() -> dict[str, Any]:
    return _event().as_dict()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("v", True),
        ("v", 1.0),
        ("v", 2),
        ("v", "1"),
        ("seq", True),
        ("seq", 1.0),
        ("seq", "0"),
        ("seq", -1),
        ("time", "2025-01-02T03:04:05Z"),
        ("time", "2025-01-02T03:04:05.000006+00:00"),
        ("time", "2025-13-02T03:04:05.000006Z"),
        ("time", "2025-01-02 03:04:05.000006Z"),
        ("run_id", ""),
        ("run_id", "run/../../etc"),
        ("level", "evaluator"),
        ("kind", "RunStarted"),
        ("kind", ""),
        ("payload", []),
        ("payload", None),
        ("prev_hash", GENESIS_HASH.upper().replace("0", "A")),
        ("prev_hash", "0" * 63),
        ("hash", None),
        ("sig", {**FAKE_SIG, "alg": "rsa"}),
        ("sig", {**FAKE_SIG, "eval_seq": -1}),
        ("sig", {**FAKE_SIG, "eval_seq": True}),
        ("sig", {**FAKE_SIG, "key_id": "XYZ"}),
        ("sig", {**FAKE_SIG, "value": "AAAA"}),
        ("sig", {**FAKE_SIG, "value": "A" * 85 + "B=="}),  # non-canonical padding bits
        ("sig", {**FAKE_SIG, "extra": 1}),
        ("extra", 1),
    ],
)
def test_schema_rejects(field: str, value: object) -> None:
    data = _valid_dict()
    data[field] = value
    with pytest.raises(EventFormatError, match="schema"):
        Event.from_line(canonical_json(data))


def test_schema_requires_every_field() -> None:
    data = _valid_dict()
    del data["sig"]
    with pytest.raises(EventFormatError, match="field 'sig'"):
        Event.from_line(canonical_json(data))


def test_format_time() -> None:
    when = datetime(2025, 1, 2, 4, 4, 5, 6, tzinfo=timezone(timedelta(hours=1)))
    assert format_time(when) == TIME
    assert format_time(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05.000000Z"
    with pytest.raises(InvalidEventError, match="timezone-aware"):
        format_time(datetime(2025, 1, 2))
    assert format_time().endswith("Z")


def test_errors_map_to_status_codes() -> None:
    assert issubclass(InvalidEventError, InvalidArgumentError)
    assert issubclass(TornTrajectoryError, FailedPreconditionError)
    assert issubclass(CorruptTrajectoryError, FailedPreconditionError)
