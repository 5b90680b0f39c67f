"""A readable view of a trajectory (``ale-robotics trajectory show``).

One table row per line: seq, time, level, kind, a short payload summary and
the signature mark (✓ verifies, ✗ missing or invalid, blank for unsigned
levels), then the verifier's verdict. Payload text is written by agents, so it
is shown as plain text (never as rich markup) with control characters escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import pydantic
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

__all__ = ["EventView", "inspect_file", "payload_summary", "render_trajectory"]

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


def inspect_file(path: Path, public_key: str | None = None) -> tuple[list[EventView], VerifyReport]:
    """Every line with its own signature status, and the full verification report.

    Signatures are checked one by one with the pinned key, or else with the
    first key the file publishes, so a row is marked even after the chain broke.
    """
    report = verify_file(path, public_key)
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


def render_trajectory(path: Path, console: Console, public_key: str | None = None) -> VerifyReport:
    """Print the table and the verdict; returns the report (the CLI's exit code)."""
    views, report = inspect_file(path, public_key)
    table = Table(title=str(path), title_justify="left", expand=False)
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("time", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("payload", no_wrap=True, overflow="ellipsis")
    table.add_column("sig", justify="center", no_wrap=True)
    for view in views:
        bad = report.first_bad_seq == view.index and not report.ok
        row_style = "on dark_red" if bad else ""
        if view.event is None:
            table.add_row(
                Text(str(view.index)),
                Text("-"),
                Text("-"),
                Text("-"),
                Text(view.error or "", style="red"),
                Text(""),
                style=row_style,
            )
            continue
        event = view.event
        mark, mark_style = _MARKS[view.signature]
        table.add_row(
            Text(str(event.seq)),
            Text(event.time),
            Text(event.level, style=_LEVEL_STYLES[event.level]),
            Text(event.kind),
            Text(payload_summary(event.payload)),
            Text(mark, style=mark_style),
            style=row_style,
        )
    console.print(table)
    style = "green" if report.ok else "bold red"
    console.print(Text(report.summary(), style=style))
    return report
