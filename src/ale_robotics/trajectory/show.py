"""A readable view of a trajectory (``ale-robotics trajectory show``).

One table row per line: seq, time of day (UTC; the date is in the title), level,
kind, the signature mark (✓ verifies, ✗ missing or invalid, blank for unsigned
levels) and a short payload summary, then the verifier's verdict. Every column
but the payload keeps its full width (at 80 columns too); the payload gets what
is left and is cut with "…". Payload text is written by agents, so it is shown
as plain text (never as rich markup) with control characters escaped.
:func:`trajectory_document` is the same view as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import pydantic
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ale_robotics.trajectory.errors import EventFormatError, SignatureError
from ale_robotics.trajectory.events import Event
from ale_robotics.trajectory.signing import (
    KEY_EVENT_KIND,
    KeyEventPayload,
    verify_event_signature,
)
from ale_robotics.trajectory.verify import VerifyReport, read_lines, verify_file

__all__ = [
    "EventView",
    "inspect_file",
    "payload_summary",
    "render_trajectory",
    "trajectory_document",
    "verify_document",
]

SignatureMark = Literal["valid", "invalid", "missing", "unsigned"]
_MARKS: Final[dict[SignatureMark, tuple[str, str]]] = {
    "valid": ("✓", "green"),
    "invalid": ("✗", "bold red"),
    "missing": ("✗", "bold red"),
    "unsigned": ("", ""),
}
_LEVEL_STYLES: Final = {"agent": "yellow", "harness": "cyan", "trusted_evaluator": "magenta"}
# Escape DEL and C1 controls too: json.dumps leaves them raw, and some
# terminals act on them (0x9b is a one-byte CSI).
_UNSAFE_RE: Final = re.compile("[\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class EventView:
    """One line of the file as ``show`` displays it."""

    index: int
    event: Event | None
    error: str | None
    signature: SignatureMark


def payload_summary(payload: Mapping[str, object], width: int = 60) -> str:
    """Compact one-line JSON of ``payload``, cut to ``width`` characters."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    text = _UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _find_key(path: Path) -> str | None:
    for _index, raw, terminated in read_lines(path):
        if not terminated:
            break
        try:
            event = Event.from_line(raw)
            if event.level == "trusted_evaluator" and event.kind == KEY_EVENT_KIND:
                return KeyEventPayload.model_validate(event.payload).public_key
        except (EventFormatError, pydantic.ValidationError):
            continue
    return None


def inspect_file(
    path: Path,
    public_key: str | None = None,
    *,
    expected_run_id: str | None = None,
    expected_head: str | None = None,
    expected_events: int | None = None,
) -> tuple[list[EventView], VerifyReport]:
    """Every line with its own signature status, and the full verification report.

    Signatures are checked one by one with the pinned key, or else with the
    first key the file publishes, so a row is marked even after the chain broke.
    The ``expected_*`` arguments go to :func:`~.verify.verify_file`.
    """
    report = verify_file(
        path,
        public_key,
        expected_run_id=expected_run_id,
        expected_head=expected_head,
        expected_events=expected_events,
    )
    key = public_key or _find_key(path)
    views: list[EventView] = []
    for index, raw, terminated in read_lines(path):
        if not terminated:
            views.append(EventView(index, None, "torn last line", "unsigned"))
            continue
        try:
            event = Event.from_line(raw)
        except EventFormatError as exc:
            views.append(EventView(index, None, str(exc), "unsigned"))
            continue
        views.append(EventView(index, event, None, _signature_mark(event, key)))
    return views, report


def _signature_mark(event: Event, key: str | None) -> SignatureMark:
    if event.level != "trusted_evaluator":
        return "unsigned" if event.sig is None else "invalid"
    if event.sig is None:
        return "missing"
    if key is None:
        return "invalid"
    try:
        verify_event_signature(event, key)
    except SignatureError:
        return "invalid"
    return "valid"


def render_trajectory(
    path: Path,
    console: Console,
    public_key: str | None = None,
    *,
    expected_run_id: str | None = None,
    expected_head: str | None = None,
    expected_events: int | None = None,
) -> VerifyReport:
    """Print the table and the verdict; returns the report (the CLI's exit code)."""
    views, report = inspect_file(
        path,
        public_key,
        expected_run_id=expected_run_id,
        expected_head=expected_head,
        expected_events=expected_events,
    )
    dates = sorted({v.event.time[:10] for v in views if v.event is not None})
    when = f" ({dates[0]}{' to ' + dates[-1] if len(dates) > 1 else ''}, UTC)" if dates else ""
    table = Table(
        title=Text(f"{path}{when}"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        expand=False,
    )
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("time", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("sig", justify="center", no_wrap=True)
    # The only column rich may narrow; its cells are cut (never wrapped) to fit.
    table.add_column("payload")
    for view in views:
        bad = report.first_bad_seq == view.index and not report.ok
        row_style = "on dark_red" if bad else ""
        if view.event is None:
            table.add_row(
                Text(str(view.index)),
                Text("-"),
                Text("-"),
                Text("-"),
                Text(""),
                Text(view.error or "", style="red", no_wrap=True, overflow="ellipsis"),
                style=row_style,
            )
            continue
        event = view.event
        mark, mark_style = _MARKS[view.signature]
        table.add_row(
            Text(str(event.seq)),
            Text(event.time[11:19]),
            Text(event.level, style=_LEVEL_STYLES[event.level]),
            Text(event.kind),
            Text(mark, style=mark_style),
            Text(payload_summary(event.payload), no_wrap=True, overflow="ellipsis"),
            style=row_style,
        )
    console.print(table)
    style = "green" if report.ok else "bold red"
    console.print(Text(report.summary(), style=style), soft_wrap=True)
    return report


def verify_document(report: VerifyReport) -> dict[str, Any]:
    """A verification report as the CLI's ``--json`` prints it.

    ``events``: events that verified (all of them when ``ok``); ``head``: the hash of
    the last verified event; ``first_bad_event``: 0-based position of the first bad
    event (its seq), None when ok or when the file cannot be read; ``line``: its
    1-based line number; ``key_source``: 'argument' (pinned with --public-key) or
    'trajectory' (taken from the file: consistency, not origin).
    """
    return {
        "ok": report.ok,
        "path": report.path,
        "events": report.events,
        "head": report.head_hash,
        "first_bad_event": report.first_bad_seq,
        "line": report.line,
        "reason": report.reason,
        "summary": report.summary(),
        "run_id": report.run_id,
        "counts": dict(report.counts),
        "eval_events": report.eval_events,
        "public_key": report.public_key,
        "key_source": report.key_source,
    }


def trajectory_document(
    path: Path,
    public_key: str | None = None,
    *,
    expected_run_id: str | None = None,
    expected_head: str | None = None,
    expected_events: int | None = None,
) -> dict[str, Any]:
    """``trajectory show --json``: every line as an object, and the verdict.

    Each entry of ``events`` has ``line`` (1-based) and ``signature`` ('valid',
    'invalid', 'missing' or 'unsigned'); a line that parses also has ``seq``,
    ``time``, ``level``, ``kind``, ``payload``, ``hash`` and ``prev_hash``; one
    that does not has ``error`` instead. ``verify`` is :func:`verify_document`.
    """
    views, report = inspect_file(
        path,
        public_key,
        expected_run_id=expected_run_id,
        expected_head=expected_head,
        expected_events=expected_events,
    )
    events: list[dict[str, Any]] = []
    for view in views:
        entry: dict[str, Any] = {"line": view.index + 1, "signature": view.signature}
        if view.event is None:
            entry["error"] = view.error
        else:
            e = view.event
            entry.update(
                seq=e.seq,
                time=e.time,
                level=e.level,
                kind=e.kind,
                payload=dict(e.payload),
                hash=e.hash,
                prev_hash=e.prev_hash,
            )
        events.append(entry)
    return {"path": str(path), "events": events, "verify": verify_document(report)}
