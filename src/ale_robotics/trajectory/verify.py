"""Checking a whole trajectory and naming its first bad event.

:func:`verify_file` reads the file once, line by line, and stops at the first
event that breaks a rule, reporting its position and why. For each line, in
this order (so that the reason given is the most specific one):

1. it is complete (a last line without a newline is reported as *torn*, never
   skipped), UTF-8, strict JSON (no NaN, no duplicate keys), and a schema-valid
   event;
2. ``seq`` equals its 0-based line number; ``run_id`` is the same on every
   line (and equals ``expected_run_id`` when given); ``prev_hash`` is the
   previous event's ``hash``; ``hash`` matches the content; the line is
   byte-for-byte the canonical encoding;
3. only ``trusted_evaluator`` events carry a signature, and they all do; their
   ``eval_seq`` runs 0, 1, 2, ... in file order; eval_seq 0 is the
   ``evaluator_key`` event (the key, which must equal ``public_key`` when
   given), eval_seq 1 the ``seed_commitment``; a later ``evaluator_key`` may
   not publish another key; every signature verifies with the key.

What the checks cannot see: the hash chain is not keyed, so whoever can write
the file can rewrite ``agent``/``harness`` events and recompute every hash;
only evaluator events are protected against that (by their signatures and
``eval_seq``). Removing events from the *end* of the file leaves a valid
shorter chain; pass ``expected_head`` (the last event's hash, recorded
elsewhere, e.g. in the run's result) and ``expected_events`` (how many events
the run recorded) to detect it, and to tell a cut file from one with events
appended after the record was made.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.trajectory.commitments import COMMITMENT_EVENT_KIND, CommitmentPayload
from ale_robotics.trajectory.errors import EventFormatError, InvalidEventError, SignatureError
from ale_robotics.trajectory.events import (
    GENESIS_HASH,
    HEX64_PATTERN,
    LEVELS,
    Event,
    Level,
    canonical_json,
    describe_validation_error,
    event_hash,
    parse_json_line,
    validate_event_dict,
)
from ale_robotics.trajectory.signing import (
    KEY_EVENT_KIND,
    KeyEventPayload,
    key_id_for,
    verify_event_signature,
)

__all__ = ["VerifyReport", "read_lines", "verified_events", "verify_file"]

KeySource = Literal["argument", "trajectory"]


class VerifyReport(BaseModel):
    """The outcome of :func:`verify_file`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    ok: bool
    events: int = Field(description="Events that verified: all of them when ok.")
    first_bad_seq: int | None = Field(
        default=None,
        description="0-based position of the first bad event: its seq if intact, the "
        "seq it should have had otherwise. None when ok or when the file cannot be read.",
    )
    line: int | None = Field(default=None, description="1-based line number of that event.")
    reason: str = Field(description="Why it is bad; a summary when ok.")
    run_id: str | None = None
    counts: dict[Level, int] = Field(description="Verified events per level.")
    eval_events: int = Field(default=0, description="Verified trusted_evaluator events.")
    public_key: str | None = Field(default=None, description="Evaluator key used (hex).")
    key_source: KeySource | None = Field(
        default=None,
        description="'argument' when the key was pinned by the caller; 'trajectory' when "
        "taken from the file's evaluator_key event (proves consistency, not origin).",
    )
    head_hash: str | None = Field(default=None, description="Hash of the last verified event.")

    def summary(self) -> str:
        """The CLI's one-line verdict."""
        if self.ok:
            return f"OK: {self.events} events, chain and signatures verify"
        if self.first_bad_seq is None:
            return f"FAIL: {self.reason}"
        return f"FAIL at event {self.first_bad_seq}: {self.reason}"


def read_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """``(index, line without newline, terminated)`` for each line; streams the file."""
    with path.open("rb") as f:
        for index, raw in enumerate(f):
            terminated = raw.endswith(b"\n")
            yield index, raw[:-1] if terminated else raw, terminated


class _Checker:
    """The rules of the module docstring, applied one line at a time, in order."""

    def __init__(self, public_key: str | None, expected_run_id: str | None) -> None:
        self.pinned = public_key
        self.expected_run_id = expected_run_id
        self.key: str | None = public_key
        self.published: str | None = None
        self.run_id: str | None = None
        self.prev_hash = GENESIS_HASH
        self.next_eval_seq = 0
        self.counts: dict[Level, int] = dict.fromkeys(LEVELS, 0)

    def check(self, index: int, raw: bytes, terminated: bool) -> tuple[Event | None, str | None]:
        """The parsed event (if any) and the first rule it breaks (None if it passes)."""
        if not terminated:
            return None, (
                f"torn last line ({len(raw)} bytes without a final newline: an interrupted "
                "or truncated write)"
            )
        if not raw:
            return None, "empty line"
        try:
            data = parse_json_line(raw)
            event = validate_event_dict(data)
        except EventFormatError as exc:
            return None, str(exc)
        reason = self._check_chain(index, raw, data, event) or self._check_signature(event)
        if reason is None:
            self.prev_hash = event.hash
            self.counts[event.level] += 1
        return event, reason

    def _check_chain(
        self, index: int, raw: bytes, data: dict[str, Any], event: Event
    ) -> str | None:
        if event.seq != index:
            return f"seq is {event.seq}, expected {index} (events were deleted, inserted or moved)"
        if self.run_id is None:
            if self.expected_run_id is not None and event.run_id != self.expected_run_id:
                return f"run_id is {event.run_id!r}, expected {self.expected_run_id!r}"
            self.run_id = event.run_id
        elif event.run_id != self.run_id:
            return f"run_id changes from {self.run_id!r} to {event.run_id!r}"
        if event.prev_hash != self.prev_hash:
            if index == 0:
                return "prev_hash of the first event is not 64 zeros (events before it removed?)"
            return (
                f"prev_hash does not match the hash of event {index - 1} "
                "(an event was deleted, inserted or changed)"
            )
        if event_hash(data) != event.hash:
            return "hash does not match the event's content (the event was edited)"
        try:
            canonical = canonical_json(data)
        except InvalidEventError as exc:
            return str(exc)
        if canonical != raw:
            return "line is not in canonical form (it was re-encoded or edited by hand)"
        return None

    def _check_signature(self, event: Event) -> str | None:
        if event.level != "trusted_evaluator":
            if event.sig is not None:
                return f"a {event.level} event carries a signature; only evaluator events do"
            return None
        if event.sig is None:
            return "missing signature on a trusted_evaluator event"
        eval_seq = event.sig.eval_seq
        if eval_seq != self.next_eval_seq:
            return (
                f"eval_seq is {eval_seq}, expected {self.next_eval_seq} "
                "(an evaluator event was deleted, duplicated or moved)"
            )
        reason = self._check_key_and_commitment(event, eval_seq)
        if reason is not None:
            return reason
        assert self.key is not None  # set by the eval_seq 0 event
        try:
            verify_event_signature(event, self.key)
        except SignatureError as exc:
            return str(exc)
        self.next_eval_seq += 1
        return None

    def _check_key_and_commitment(self, event: Event, eval_seq: int) -> str | None:
        if eval_seq == 0 and event.kind != KEY_EVENT_KIND:
            return (
                f"the evaluator's first event (eval_seq 0) must be {KEY_EVENT_KIND!r}, "
                f"not {event.kind!r}: no evaluator key is published"
            )
        if event.kind == KEY_EVENT_KIND:
            try:
                published = KeyEventPayload.model_validate(event.payload)
            except pydantic.ValidationError as exc:
                return f"{KEY_EVENT_KIND} payload: {describe_validation_error(exc)}"
            if published.key_id != key_id_for(published.public_key):
                return f"{KEY_EVENT_KIND} payload: key_id does not belong to public_key"
            if self.published is None:
                if self.pinned is not None and published.public_key != self.pinned:
                    return (
                        f"the published evaluator key {published.public_key} is not the "
                        f"expected key {self.pinned}"
                    )
                self.published = published.public_key
                self.key = self.pinned or published.public_key
            elif published.public_key != self.published:
                return (
                    f"a second {KEY_EVENT_KIND} publishes a different key "
                    f"({published.public_key}, first was {self.published})"
                )
        if (eval_seq == 1) != (event.kind == COMMITMENT_EVENT_KIND):
            return (
                f"the evaluator's second event (eval_seq 1) must be {COMMITMENT_EVENT_KIND!r}, "
                f"and only it; found {event.kind!r} at eval_seq {eval_seq}"
            )
        if event.kind == COMMITMENT_EVENT_KIND:
            try:
                CommitmentPayload.model_validate(event.payload)
            except pydantic.ValidationError as exc:
                return f"{COMMITMENT_EVENT_KIND} payload: {describe_validation_error(exc)}"
        return None

    def report(self, path: Path, ok: bool, index: int | None, reason: str) -> VerifyReport:
        return VerifyReport(
            path=str(path),
            ok=ok,
            events=sum(self.counts.values()),
            first_bad_seq=index,
            line=None if index is None else index + 1,
            reason=reason,
            run_id=self.run_id,
            counts=dict(self.counts),
            eval_events=self.counts["trusted_evaluator"],
            public_key=self.key,
            key_source=None if self.key is None else "argument" if self.pinned else "trajectory",
            head_hash=None if self.prev_hash == GENESIS_HASH else self.prev_hash,
        )


def verify_file(
    path: Path | str,
    public_key: str | None = None,
    *,
    expected_run_id: str | None = None,
    expected_head: str | None = None,
    expected_events: int | None = None,
) -> VerifyReport:
    """Verify a trajectory file; never raises for a bad file, reports it instead.

    ``public_key`` (raw Ed25519 key, 64 hex; see
    :func:`~ale_robotics.trajectory.signing.load_public_key` for files) pins the
    evaluator key: without it, the key comes from the file itself.
    ``expected_head`` is the hash the last event must have (detects events cut
    off the end); ``expected_events`` the number of events it must have (names a cut
    or an appended file as such); ``expected_run_id`` detects a trajectory of another run.
    """
    path = Path(path)
    checker = _checker(public_key, expected_run_id)
    try:
        return _verify(path, read_lines(path), checker, expected_head, expected_events, None)
    except OSError as exc:
        return checker.report(path, False, None, f"cannot read {path}: {exc}")


def verified_events(
    path: Path | str,
    public_key: str | None = None,
    *,
    expected_run_id: str | None = None,
    expected_head: str | None = None,
    expected_events: int | None = None,
) -> tuple[VerifyReport, list[Event] | None]:
    """:func:`verify_file`, and the events when (and only when) the whole file verifies.

    The file is read once and the events are parsed from the very bytes that
    verified, so they cannot differ from what the signatures covered (a file
    rewritten between a check and a second read changes nothing here). For the
    audit and every listing that trusts a run's signed events, not its ``result.json``.
    """
    path = Path(path)
    checker = _checker(public_key, expected_run_id)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return checker.report(path, False, None, f"cannot read {path}: {exc}"), None
    events: list[Event] = []
    report = _verify(path, _split(data), checker, expected_head, expected_events, events)
    return report, events if report.ok else None


def _checker(public_key: str | None, expected_run_id: str | None) -> _Checker:
    if public_key is not None and not re.match(HEX64_PATTERN, public_key):
        raise InvalidEventError(f"public_key must be 64 lowercase hex digits, not {public_key!r}")
    return _Checker(public_key, expected_run_id)


def _split(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """:func:`read_lines` over bytes already read."""
    lines = data.split(b"\n")
    last = lines.pop()  # b"" when the data ends in a newline
    for index, line in enumerate(lines):
        yield index, line, True
    if last:
        yield len(lines), last, False


def _verify(
    path: Path,
    lines: Iterator[tuple[int, bytes, bool]],
    checker: _Checker,
    expected_head: str | None,
    expected_events: int | None,
    events: list[Event] | None,
) -> VerifyReport:
    """The checks of :func:`verify_file` over ``lines``; appends each event that verified
    to ``events`` when given. ``OSError`` from reading ``lines`` propagates."""
    index = -1
    for index, raw, terminated in lines:
        event, reason = checker.check(index, raw, terminated)
        if reason is not None:
            return checker.report(path, False, index, reason)
        if events is not None and event is not None:
            events.append(event)
    count = index + 1
    if expected_events is not None and count != expected_events:
        if count < expected_events:
            return checker.report(
                path,
                False,
                count,
                f"the file ends after {count} events, but the run recorded "
                f"{expected_events} (events were removed from the end)",
            )
        return checker.report(
            path,
            False,
            expected_events,
            f"the file has {count} events, but the run recorded {expected_events} "
            "(events were appended after the run's record was written)",
        )
    if expected_head is not None and checker.prev_hash != expected_head:
        return checker.report(
            path,
            False,
            count,
            f"the file ends after {count} events with hash {checker.prev_hash}, but the "
            f"expected last hash is {expected_head} (events were removed from the end)",
        )
    return checker.report(path, True, None, "chain and signatures verify")
