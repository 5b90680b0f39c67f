"""A run's trajectory as its page shows it: each event in time order, with its signature
status, and the verifier's verdict (:func:`timeline`).

Apart from :mod:`.pages` (the rest of what a run page shows) to keep each to its size; it
formats the agent-written parts of events the same way (:func:`.pages.visible`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ale_robotics.harness.report import RunReport, StoppedRunReport
from ale_robotics.report.pages import parse_time, visible
from ale_robotics.trajectory import inspect_file
from ale_robotics.trajectory.show import payload_summary

__all__ = [
    "PAYLOAD_MAX_CHARS",
    "TIMELINE_MAX_ROWS",
    "Timeline",
    "TimelineRow",
    "signature_text",
    "timeline",
]

TIMELINE_MAX_ROWS: Final = 2000
"""Trajectory events shown on a page; a longer trajectory says how many were left out."""
PAYLOAD_MAX_CHARS: Final = 20_000
"""The full payload shown under an event is cut here (the file has all of it)."""


@dataclass(frozen=True)
class TimelineRow:
    """One trajectory event as the timeline shows it."""

    seq: str
    time: str
    delta: str
    """Seconds since the earliest event."""
    level: str
    kind: str
    signature: str
    """'valid', 'invalid', 'missing' or 'unsigned' (harness and agent events carry none)."""
    summary: str
    payload: str
    """The full payload as indented JSON (cut at :data:`PAYLOAD_MAX_CHARS`)."""
    bad: bool
    """The first event that does not verify."""


@dataclass(frozen=True)
class Timeline:
    """A run's trajectory: its events in time order and the verifier's verdict."""

    ok: bool
    verdict: str
    key_note: str
    rows: list[TimelineRow] = field(default_factory=list)
    hidden: int = 0
    """Events past :data:`TIMELINE_MAX_ROWS`, not shown."""
    missing: bool = False
    reordered: bool = False
    """Whether time order differs from the chain's (seq) order: the evaluator's signed
    events are appended when the harness reads them, after harness events that happened
    later (the page says so above the table)."""


_SIG_TEXT: Final = {
    "valid": "✓ valid",
    "invalid": "✗ invalid",
    "missing": "✗ missing",
    "unsigned": "unsigned",
}


def _in_time_order(views: Sequence[Any]) -> list[tuple[Any, dt.datetime | None]]:
    """The events with their times, in the order they happened: by time, then seq.

    A trajectory's order (seq) is the order its events were appended, by two writers:
    the harness appends its own events as they happen, and the evaluator's signed events,
    stamped on the evaluator's clock when they happened, when it reads them (after the
    agent's exit, say), so seq order goes back in time. An event without a readable time
    keeps its place after the event before it in the chain."""
    timed: list[tuple[dt.datetime | None, dt.datetime | None, int, Any]] = []
    last: dt.datetime | None = None
    for i, view in enumerate(views):
        when = parse_time(view.event.time) if view.event is not None else None
        if when is not None and when.utcoffset() is None:
            when = when.replace(tzinfo=dt.UTC)
        key = when if when is not None else last
        timed.append((key, when, i, view))
        last = key if key is not None else last
    if any(key is None for key, *_ in timed):  # nothing to order by: the chain's order
        return [(view, when) for _, when, _, view in timed]
    timed.sort(key=lambda t: (t[0], t[2]))
    return [(view, when) for _, when, _, view in timed]


def timeline(path: Path, report: RunReport | StoppedRunReport | None) -> Timeline:
    """Each event of ``trajectory.jsonl`` with its signature status, in the order the
    events happened (:func:`_in_time_order`; the seq column keeps the chain's order), and
    the verdict of checking it against what ``result.json`` recorded (run id, last hash,
    event count), as ``ale-robotics trajectory verify RUN_DIR`` does."""
    if path.is_symlink() or not path.is_file():
        return Timeline(False, "no trajectory.jsonl in the run directory", "", missing=True)
    views, verdict = inspect_file(
        path,
        expected_run_id=None if report is None else report.run_id,
        expected_head=None if report is None else report.trajectory_head or None,
        expected_events=None if report is None else report.trajectory_events or None,
    )
    ordered = _in_time_order(views[:TIMELINE_MAX_ROWS])
    first = min((when for _, when in ordered if when is not None), default=None)
    rows: list[TimelineRow] = []
    for view, when in ordered:
        bad = not verdict.ok and verdict.first_bad_seq == view.index
        if view.event is None:
            rows.append(
                TimelineRow(
                    str(view.index), "—", "", "—", "—", "", visible(view.error or ""), "", bad
                )
            )
            continue
        event = view.event
        delta = ""
        if when is not None and first is not None:
            delta = f"+{(when - first).total_seconds():.2f} s"
        full = json.dumps(dict(event.payload), indent=2, ensure_ascii=False, sort_keys=True)
        if len(full) > PAYLOAD_MAX_CHARS:
            full = full[:PAYLOAD_MAX_CHARS] + "\n… (cut; the trajectory file has all of it)"
        rows.append(
            TimelineRow(
                seq=str(event.seq),
                time=event.time[11:23] if len(event.time) >= 23 else visible(event.time),
                delta=delta,
                level=event.level,
                kind=visible(event.kind),
                signature=view.signature,
                summary=visible(payload_summary(event.payload, width=160)),
                payload=visible(full),
                bad=bad,
            )
        )
    note = ""
    if verdict.key_source == "trajectory":
        note = (
            "The evaluator key is the one the trajectory publishes: the signatures show "
            "the evaluator events are consistent, not who made them (pin the key with "
            "'ale-robotics trajectory verify --public-key')."
        )
    elif verdict.key_source == "argument":
        note = "The evaluator key was pinned."
    chain = list(views[:TIMELINE_MAX_ROWS])
    return Timeline(
        ok=verdict.ok,
        verdict=visible(verdict.summary()),
        key_note=note,
        rows=rows,
        hidden=max(0, len(views) - TIMELINE_MAX_ROWS),
        reordered=[view for view, _ in ordered] != chain,
    )


def signature_text(mark: str) -> str:
    """The timeline's signature cell: '✓ valid', '✗ invalid', '✗ missing' or '—'."""
    return _SIG_TEXT.get(mark, "—")
