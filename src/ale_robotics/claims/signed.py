"""The evaluator's signed events of a run, read and compared with what result.json claims.

The verified trajectory's events by job (:class:`SignedEvents`), their labels for
messages, and the comparisons every check uses (exact floats, first difference in a
nested document, metric by metric), apart from the checks themselves (:mod:`.checks`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_robotics.trajectory import Event, VerifyReport, verified_events

__all__ = [
    "SignedEvents",
    "event_label",
    "files_text",
    "first_diff",
    "list_diff",
    "load_signed",
    "metric_diffs",
    "outcome_state",
    "payload_dict",
    "payload_list",
    "same",
]


def event_label(event: Event) -> str:
    """How a check names a signed event: its kind, file position and evaluator counter."""
    eval_seq = f" (eval_seq {event.sig.eval_seq})" if event.sig is not None else ""
    return f"the signed `{event.kind}` event #{event.seq}{eval_seq}"


@dataclass
class SignedEvents:
    """The verified evaluator events of a run, and those of the job result.json names."""

    events: list[Event]
    job_id: str

    def __post_init__(self) -> None:
        self.job = [e for e in self.events if e.payload.get("job_id") == self.job_id]

    def first(self, kind: str) -> Event | None:
        return next((e for e in self.events if e.kind == kind), None)

    def last_of_job(self, kind: str) -> Event | None:
        """The job's latest event of ``kind``: a job re-run after a crash signs it again."""
        found = [e for e in self.job if e.kind == kind]
        return found[-1] if found else None

    def outcome(self) -> Event | None:
        """The event that signs the job's terminal state: ``result``, or a failed validation."""
        result = self.last_of_job("result")
        if result is not None:
            return result
        failed = [
            e for e in self.job if e.kind == "validation" and e.payload.get("passed") is False
        ]
        return failed[-1] if failed else None


def outcome_state(event: Event) -> str:
    """The terminal state an outcome event signs (a failed validation is a rejection)."""
    if event.kind == "validation":
        return "REJECTED"
    return str(event.payload.get("state"))


def load_signed(
    path: Path, public_key: str | None, run_id: str, head: str | None, n_events: int | None
) -> tuple[VerifyReport, list[Event] | None]:
    """The verification report, and the signed (``trusted_evaluator``) events when (and
    only when) the whole file verified, parsed from the very bytes that verified."""
    verified, events = verified_events(
        path,
        public_key,
        expected_run_id=run_id,
        expected_head=head,
        expected_events=n_events,
    )
    if events is None:
        return verified, None
    return verified, [e for e in events if e.level == "trusted_evaluator"]


def payload_list(payload: Mapping[str, Any], key: str) -> list[Any]:
    value = payload.get(key)
    return list(value) if isinstance(value, list) else []


def payload_dict(payload: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    return dict(value) if isinstance(value, dict) else {}


def same(a: object, b: object) -> bool:
    """Equality where NaN equals NaN (a NaN measurement is evidence, kept as such)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def metric_diffs(
    claimed: Mapping[str, Any], signed: Mapping[str, Any]
) -> list[tuple[str, str, str]]:
    """``(name, claimed, signed)`` as text for every metric that differs or is on one side only."""

    def shown(v: object) -> str:
        return "missing" if v is None else repr(v)

    return [
        (k, shown(claimed.get(k)), shown(signed.get(k)))
        for k in sorted(set(claimed) | set(signed))
        if not same(claimed.get(k), signed.get(k))
    ]


def first_diff(a: object, b: object, where: str = "") -> str | None:
    """Where two JSON values first differ (``problems[2].collided: True vs False``), or None."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{where}.{k}: {'missing' if k not in a else 'present'} vs " + (
                    "missing" if k not in b else "present"
                )
            found = first_diff(a[k], b[k], f"{where}.{k}")
            if found is not None:
                return found
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{where or '(top level)'}: {len(a)} entries vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_diff(x, y, f"{where}[{i}]")
            if found is not None:
                return found
        return None
    return None if same(a, b) else f"{where.lstrip('.') or '(top level)'}: {a!r} vs {b!r}"


def list_diff(claimed: Sequence[Any], signed: Sequence[Any]) -> str | None:
    """Where two per-episode lists first differ, in words; None when they are the same."""
    if len(claimed) != len(signed):
        return f"{len(claimed)} values vs {len(signed)}"
    for i, (a, b) in enumerate(zip(claimed, signed, strict=True)):
        if not same(a, b):
            return f"episode {i}: {a!r} vs {b!r}"
    return None


def files_text(files: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {str(v)[:12]}..." for k, v in sorted(files.items())) + "}"
