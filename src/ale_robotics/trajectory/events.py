"""The trajectory event: its schema, its canonical encoding and its hash.

A trajectory is a JSON-lines file, one event per line, each line ending in
``\\n``. An event has exactly these fields (schema version ``v`` = 1)::

    v          1
    seq        0, 1, 2, ... : the event's position in the file
    time       UTC, RFC 3339 with microseconds and "Z": 2025-01-31T12:00:00.000000Z
    run_id     the run the event belongs to; the same on every line of a file
    level      "agent" | "harness" | "trusted_evaluator"
    kind       what happened, lowercase: "run_started", "evaluator_key", ...
    payload    a JSON object
    prev_hash  the previous event's ``hash``; 64 zeros for the first event
    hash       SHA-256 (lowercase hex) of the canonical encoding of all the
               fields above and ``sig``, that is of the event without ``hash``
    sig        null, or on trusted_evaluator events only:
               {"alg": "ed25519", "key_id": 16 hex, "eval_seq": int, "value": base64}
               (see :mod:`ale_robotics.trajectory.signing` for what it covers)

**Canonical encoding.** A JSON value is encoded as Python's
``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)`` encoded as UTF-8. Precisely: no whitespace; object keys sorted
by Unicode code point; strings as UTF-8 with only ``"``, ``\\``, and control
characters below U+0020 escaped (``\\n``, ``\\t``, ... short forms, others as
lowercase ``\\u00XX``), everything else, U+2028 and non-BMP characters included,
written raw; integers in decimal without exponent; floats as Python's ``repr``
(shortest round-trip digits: ``0.1``, ``1e-07``, ``1e+16``, ``-0.0``, and ``1.0``
stays distinct from ``1``); ``true``/``false``/``null``. NaN and infinities are
rejected (they are not JSON), as are lone surrogates (not UTF-8) and non-string
keys. The intent is RFC 8785 (JCS): one byte string per value, so that a hash
means the same thing to every reader. It differs from JCS in the number format
(JCS uses ECMAScript's, e.g. ``1e-7``) and in key order for characters outside
the Basic Multilingual Plane (JCS sorts by UTF-16 code units), so a verifier in
another language must follow the rules above, not a JCS library. The golden
vectors in ``tests/trajectory/golden/`` pin these bytes.

Every line of a trajectory is the canonical encoding of its whole event (hash
included), so a file has exactly one valid byte representation; a reformatted
line fails verification even when its content is intact.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, field_validator

from ale_robotics.trajectory.errors import EventFormatError, InvalidEventError

__all__ = [
    "EVENT_FIELDS",
    "GENESIS_HASH",
    "LEVELS",
    "SCHEMA_VERSION",
    "Event",
    "Level",
    "Signature",
    "build_event",
    "canonical_json",
    "describe_validation_error",
    "event_hash",
    "format_time",
    "normalize_payload",
    "parse_json_line",
    "sha256_hex",
    "validate_event_dict",
]

SCHEMA_VERSION: Final = 1
GENESIS_HASH: Final = "0" * 64
"""The ``prev_hash`` of the first event of every trajectory."""

Level = Literal["agent", "harness", "trusted_evaluator"]
LEVELS: Final[tuple[Level, ...]] = ("agent", "harness", "trusted_evaluator")

EVENT_FIELDS: Final = (
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
)

HEX64_PATTERN: Final = r"^[0-9a-f]{64}$"
KIND_PATTERN: Final = r"^[a-z][a-z0-9_.-]{0,63}$"
RUN_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:+@-]{0,127}$"
TIME_PATTERN: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
_SIG_VALUE_RE: Final = re.compile(r"^[A-Za-z0-9+/]{86}==$")


def _exact_int(value: object) -> object:
    # Pydantic's strict mode still lets True and 1.0 through a Literal[1] and
    # True through some int paths; a hashed field must have one spelling.
    if type(value) is not int:
        raise ValueError(f"must be a JSON integer, not {type(value).__name__}")
    return value


ExactInt = Annotated[int, BeforeValidator(_exact_int)]


def format_time(when: datetime | None = None) -> str:
    """``when`` (default: now) as the trajectory's time format; naive datetimes are refused."""
    if when is None:
        when = datetime.now(UTC)
    elif when.tzinfo is None:
        raise InvalidEventError("event time must be timezone-aware (use datetime.now(UTC))")
    return when.astimezone(UTC).strftime(_TIME_FORMAT)


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256, the digest format used everywhere in a trajectory."""
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: object) -> bytes:
    """The canonical encoding (module docstring) of a JSON value.

    Raises :class:`InvalidEventError` for what has no canonical form: NaN or
    infinity, lone surrogates, non-JSON types.
    """
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise InvalidEventError(f"value has no canonical JSON encoding: {exc}") from exc


def normalize_payload(
    payload: Mapping[str, object], where: str = "payload"
) -> dict[str, JsonValue]:
    """A deep copy of ``payload`` with only plain JSON types, or a precise error.

    Done at append and sign time so that a bad value is refused where it is
    produced, with its path (``payload.metrics.mean_return is nan``), instead of
    surfacing later as a hash or signature mismatch. Tuples become lists;
    ``bool``/``int``/``float``/``str`` subclasses (enums) become the base type.
    """
    if not isinstance(payload, Mapping):
        raise InvalidEventError(f"{where} must be a JSON object, not {type(payload).__name__}")
    result = _normalize(payload, where)
    assert isinstance(result, dict)
    return result


def _normalize(value: object, path: str) -> JsonValue:
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEventError(
                f"{path} is {value!r}: NaN and infinity are not JSON and cannot be hashed; "
                "record it as null or a string"
            )
        return float(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidEventError(f"{path} is not valid Unicode text: {exc}") from exc
        return str.__str__(value)
    if isinstance(value, Mapping):
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEventError(f"{path} has a non-string key {key!r}")
            out[str.__str__(key)] = _normalize(item, f"{path}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [_normalize(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise InvalidEventError(
        f"{path} has type {type(value).__name__}, which is not JSON "
        "(convert numpy scalars with .item() and arrays with .tolist())"
    )


def event_hash(fields: Mapping[str, object]) -> str:
    """The ``hash`` of an event given as a mapping: SHA-256 over all fields but ``hash``."""
    return sha256_hex(canonical_json({k: v for k, v in fields.items() if k != "hash"}))


def _reject_duplicate_keys(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    # Two parsers may keep different copies of a duplicated key; the hash would
    # then mean different things to different readers.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise EventFormatError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise EventFormatError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise EventFormatError(f"number {text} is out of range")
    return value


def parse_json_line(raw: bytes) -> dict[str, Any]:
    """Parse one line (without its newline) as a strict JSON object.

    Stricter than :func:`json.loads`: UTF-8 only, no NaN/Infinity, no number
    that overflows to infinity, no duplicate keys.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EventFormatError(f"not UTF-8: {exc}") from exc
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicate_keys,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except json.JSONDecodeError as exc:
        raise EventFormatError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise EventFormatError(f"not a JSON object but a {type(value).__name__}")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Signature(_Strict):
    """An Ed25519 signature by the trusted evaluator (see :mod:`.signing` for the message)."""

    alg: Literal["ed25519"] = Field(description="Signature algorithm; only Ed25519.")
    key_id: str = Field(
        pattern=r"^[0-9a-f]{16}$",
        description="First 16 hex digits of SHA-256 of the raw 32-byte public key.",
    )
    eval_seq: ExactInt = Field(
        ge=0,
        description="The evaluator's own per-run counter (0, 1, 2, ...). Signed, and "
        "checked for contiguity in file order, because the evaluator cannot know the "
        "event's position in the harness's chain but deleting or reordering its events "
        "must still be detected after an attacker recomputes the hashes.",
    )
    value: str = Field(description="The 64-byte signature, standard base64 with padding.")

    @field_validator("value")
    @classmethod
    def _canonical_base64(cls, value: str) -> str:
        # Base64 has several spellings of the same bytes; only one is accepted so
        # that the (hashed) text and the signature bytes correspond one to one.
        if not _SIG_VALUE_RE.match(value):
            raise ValueError("must be the standard base64 (with padding) of 64 bytes")
        if base64.b64encode(base64.b64decode(value)).decode("ascii") != value:
            raise ValueError("is not canonical base64")
        return value


class Event(_Strict):
    """One line of a trajectory (module docstring for the format)."""

    v: ExactInt = Field(description="Schema version; 1.")
    seq: ExactInt = Field(ge=0, description="0-based position in the file; contiguous.")
    time: str = Field(pattern=TIME_PATTERN, description="UTC, RFC 3339, microseconds, 'Z'.")
    run_id: str = Field(pattern=RUN_ID_PATTERN, description="The run this trajectory is for.")
    level: Level = Field(description="Who produced the event.")
    kind: str = Field(pattern=KIND_PATTERN, description="What happened (lowercase identifier).")
    payload: dict[str, JsonValue] = Field(description="Event data, a JSON object.")
    prev_hash: str = Field(pattern=HEX64_PATTERN, description="The previous event's hash.")
    hash: str = Field(pattern=HEX64_PATTERN, description="SHA-256 over every other field.")
    sig: Signature | None = Field(description="Evaluator signature; null on other levels.")

    @field_validator("v")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema version {value}; this reader knows 1")
        return value

    @field_validator("time")
    @classmethod
    def _real_time(cls, value: str) -> str:
        try:
            datetime.strptime(value, _TIME_FORMAT)
        except ValueError as exc:
            raise ValueError(f"not a valid date and time: {exc}") from exc
        return value

    def as_dict(self) -> dict[str, Any]:
        """The event as plain JSON data, every field present (``sig`` as null or object)."""
        return self.model_dump(mode="python")

    def compute_hash(self) -> str:
        """What ``hash`` must be for the event's other fields."""
        return event_hash(self.as_dict())

    def to_line(self) -> bytes:
        """The event's line in a trajectory: canonical encoding plus ``\\n``."""
        return canonical_json(self.as_dict()) + b"\n"

    @classmethod
    def from_line(cls, raw: bytes) -> Event:
        """Parse and schema-check one line (without its newline); no hash or chain check."""
        return validate_event_dict(parse_json_line(raw))


def validate_event_dict(data: Mapping[str, Any]) -> Event:
    """Schema-check parsed JSON as an :class:`Event`, with a one-line error message."""
    try:
        return Event.model_validate(data)
    except pydantic.ValidationError as exc:
        raise EventFormatError(describe_validation_error(exc)) from exc


def describe_validation_error(exc: pydantic.ValidationError) -> str:
    """First schema violation as ``field 'sig.eval_seq': message`` (plus a count of others)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "event"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"schema: field '{where}': {first['msg']}{more}"


def build_event(
    *,
    seq: int,
    prev_hash: str,
    run_id: str,
    level: Level,
    kind: str,
    payload: Mapping[str, object],
    time: str,
    sig: Signature | None = None,
) -> Event:
    """Assemble, hash and schema-check an event; the one place events are made.

    The writer calls it with the chain position it read under its lock; tests
    and the golden vectors call it with fixed values.
    """
    fields: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "seq": seq,
        "time": time,
        "run_id": run_id,
        "level": level,
        "kind": kind,
        "payload": normalize_payload(payload),
        "prev_hash": prev_hash,
        "sig": None if sig is None else sig.model_dump(mode="python"),
    }
    fields["hash"] = event_hash(fields)
    try:
        return Event.model_validate(fields)
    except pydantic.ValidationError as exc:
        raise InvalidEventError(describe_validation_error(exc)) from exc
