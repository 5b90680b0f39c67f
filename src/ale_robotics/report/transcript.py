"""The agent's model usage and transcript on a run page, as plain data.

A run with a model gateway has ``model_usage`` in its ``result.json`` and every call
in ``model_calls.jsonl`` (:mod:`ale_robotics.trajectory.transcript`). The page shows the
usage (calls, tokens, per model, the budget) and each call: when, which model, tokens,
latency, the request's messages and the response's text and tool calls, and whether
the file is the one the signed trajectory's ``model_call`` events record
(:func:`~ale_robotics.trajectory.transcript.check_transcript`, as ``trajectory verify``).

Everything here is the agent's or its model's text: it stays text (control characters
made visible by :func:`~.pages.visible`) and the templates autoescape it. Long bodies are
cut, with a note; the whole file is copied into the site beside the page.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pydantic

from ale_robotics.gateway.usage import ModelUsage
from ale_robotics.harness.report import RunReport, StoppedRunReport
from ale_robotics.report.pages import fmt_seconds, fmt_time, visible
from ale_robotics.trajectory import verified_events
from ale_robotics.trajectory.errors import EventFormatError
from ale_robotics.trajectory.events import parse_json_line
from ale_robotics.trajectory.transcript import (
    TRANSCRIPT_FILE,
    ModelCallRecord,
    body_bytes,
    check_transcript,
)

__all__ = [
    "BODY_MAX_CHARS",
    "MAX_CALLS",
    "RAW_MAX_BYTES",
    "CallView",
    "Message",
    "TranscriptView",
    "UsageRow",
    "UsageView",
    "transcript_view",
    "usage_view",
]

MAX_CALLS: Final = 500
"""Calls listed on a page; a longer transcript says how many were left out."""
BODY_MAX_CHARS: Final = 8_000
"""A message, a response or a raw body is cut here (the copied file has all of it)."""
RAW_MAX_BYTES: Final = 64 * 1024 * 1024
"""A transcript larger than this is not copied into the site."""
READ_MAX_BYTES: Final = 64 * 1024 * 1024
"""At most this much of model_calls.jsonl is read for the page."""
CUT_NOTE: Final = "\n… (cut; model_calls.jsonl has all of it)"


def _cut(text: str, limit: int = BODY_MAX_CHARS) -> tuple[str, bool]:
    text = visible(text)
    if len(text) <= limit:
        return text, False
    return text[:limit] + CUT_NOTE, True


@dataclass(frozen=True)
class UsageRow:
    model: str
    calls: int
    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class UsageView:
    """``result.json``'s ``model_usage``, as the page shows it."""

    summary: str
    calls: int
    refused_calls: int
    tokens_in: int
    tokens_out: int
    tokens: int
    budget_tokens: int | None
    budget_exhausted: bool
    estimated_calls: int
    models_allowed: list[str]
    per_model: list[UsageRow]


def usage_view(report: RunReport | StoppedRunReport | None) -> UsageView | None:
    """The run's model usage; None when it had no model gateway."""
    usage: ModelUsage | None = getattr(report, "model_usage", None)
    if usage is None:
        return None
    return UsageView(
        summary=usage.summary(),
        calls=usage.calls,
        refused_calls=usage.refused_calls,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        tokens=usage.tokens,
        budget_tokens=usage.budget_tokens,
        budget_exhausted=usage.budget_exhausted,
        estimated_calls=usage.estimated_calls,
        models_allowed=[visible(m) for m in usage.models_allowed],
        per_model=[
            UsageRow(visible(name), t.calls, t.tokens_in, t.tokens_out)
            for name, t in sorted(usage.per_model.items())
        ],
    )


@dataclass(frozen=True)
class Message:
    """One message of a request, or one part of a response: who, and its text."""

    role: str
    text: str
    cut: bool = False


@dataclass(frozen=True)
class CallView:
    """One model call as the transcript section shows it."""

    call: int
    time: str
    protocol: str
    endpoint: str
    model: str
    status: int
    refused: str | None
    reason: str
    stream: bool
    tokens_in: int
    tokens_out: int
    usage_source: str
    latency: str
    messages: list[Message]
    """The request's system prompt and messages, in order."""
    response: list[Message]
    """The response's text and tool calls (assembled from the events when streamed)."""
    request_raw: str
    response_raw: str
    cut: bool
    """Whether some body shown was cut."""


@dataclass(frozen=True)
class TranscriptView:
    """A run's ``model_calls.jsonl`` and whether it matches the signed trajectory."""

    present: bool
    ok: bool
    verdict: str
    calls: list[CallView] = field(default_factory=list)
    hidden: int = 0
    """Calls past :data:`MAX_CALLS`, not shown."""
    problems: list[str] = field(default_factory=list)
    """Lines that could not be read as calls."""
    raw_href: str | None = None
    """The copy of the file in the site, relative to the run page; None: not copied."""
    size: int = 0


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text of its parts (images and
    other parts named), or its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif kind == "tool_use":
                    out.append(_tool(part.get("name"), part.get("input")))
                elif kind == "tool_result":
                    out.append(
                        f"[tool result {part.get('tool_use_id', '')}]\n"
                        + _text(part.get("content"))
                    )
                else:
                    out.append(f"[{kind}]" if isinstance(kind, str) else json.dumps(part))
            else:
                out.append(str(part))
        return "\n".join(out)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def _tool(name: Any, arguments: Any) -> str:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f"→ {name}({arguments})"


def _message(role: str, text: str) -> Message:
    shown, cut = _cut(text)
    return Message(visible(role), shown, cut)


def _request_messages(body: Any) -> list[Message]:
    if not isinstance(body, dict):
        return []
    out: list[Message] = []
    system = body.get("system")
    if system:
        out.append(_message("system", _text(system)))
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "?"))
        parts = [_text(message.get("content"))]
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                fn = call.get("function") or {}
                parts.append(_tool(fn.get("name"), fn.get("arguments")))
        out.append(_message(role, "\n".join(p for p in parts if p)))
    return out


def _response_parts(body: Any) -> list[tuple[str, str]]:
    """(kind, text) of a non-streamed OpenAI or Anthropic response body."""
    if not isinstance(body, dict):
        return []
    parts: list[tuple[str, str]] = []
    if isinstance(body.get("error"), dict):
        parts.append(("error", str(body["error"].get("message", body["error"]))))
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        if message.get("content"):
            parts.append(("text", _text(message["content"])))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            parts.append(("tool call", _tool(fn.get("name"), fn.get("arguments"))))
    if body.get("type") == "message":
        for block in body.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                parts.append(("tool call", _tool(block.get("name"), block.get("input"))))
            elif isinstance(block, dict):
                parts.append(("text", _text([block])))
    return parts


def _stream_parts(text: str) -> list[tuple[str, str]]:
    """The text and tool calls assembled from a streamed response's events."""
    content: list[str] = []
    tools: dict[int, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:].strip())
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        for choice in event.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                slot = tools.setdefault(int(call.get("index", 0)), ["", ""])
                fn = call.get("function") or {}
                slot[0] += fn.get("name") or ""
                slot[1] += fn.get("arguments") or ""
        kind = event.get("type")
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                tools[int(event.get("index", 0))] = [str(block.get("name", "")), ""]
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                content.append(str(delta.get("text", "")))
            elif delta.get("type") == "input_json_delta":
                tools.setdefault(int(event.get("index", 0)), ["", ""])[1] += str(
                    delta.get("partial_json", "")
                )
    parts = [("text", "".join(content))] if content else []
    parts.extend(("tool call", _tool(n, a)) for _, (n, a) in sorted(tools.items()))
    return parts


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _call_view(record: ModelCallRecord) -> CallView:
    if record.request is None or record.request_encoding is None:  # a refused call's
        size = "?" if record.request_bytes is None else f"{record.request_bytes:,}"
        request = f"(not kept: {size} bytes, SHA-256 {record.request_sha256 or '?'})"
    elif record.request_encoding == "utf-8":
        request = body_bytes(record.request, record.request_encoding).decode("utf-8", "replace")
    else:
        request = record.request
    response = record.response
    request_body = _json_or_none(request) if record.request_encoding == "utf-8" else None
    if record.response_encoding != "utf-8":
        parts: list[tuple[str, str]] = []
    elif record.stream:
        parts = _stream_parts(response)
    else:
        parts = _response_parts(_json_or_none(response))
    pretty_request = (
        json.dumps(request_body, indent=2, ensure_ascii=False)
        if request_body is not None
        else request
    )
    request_raw, cut_req = _cut(pretty_request)
    response_raw, cut_resp = _cut(response)
    messages = _request_messages(request_body)
    shown = [_message(kind, text) for kind, text in parts]
    return CallView(
        call=record.call,
        time=fmt_time(record.time),
        protocol=record.protocol,
        endpoint=visible(record.endpoint),
        model=visible(record.model or "—"),
        status=record.status,
        refused=record.refused,
        reason=visible(record.reason or ""),
        stream=record.stream,
        tokens_in=record.tokens_in,
        tokens_out=record.tokens_out,
        usage_source=record.usage_source,
        latency=fmt_seconds(record.latency_s),
        messages=messages,
        response=shown,
        request_raw=request_raw,
        response_raw=response_raw,
        cut=cut_req or cut_resp or any(m.cut for m in (*messages, *shown)),
    )


def _verdict(run_dir: Path, report: RunReport | StoppedRunReport | None) -> tuple[bool, str]:
    trajectory = run_dir / "trajectory.jsonl"
    if trajectory.is_symlink() or not trajectory.is_file():
        return False, "Not checked: the run directory has no trajectory.jsonl."
    verify, events = verified_events(
        trajectory,
        expected_run_id=None if report is None else report.run_id,
        expected_head=None if report is None else report.trajectory_head or None,
        expected_events=None if report is None else report.trajectory_events or None,
    )
    if events is None:
        return False, f"Not checked: the trajectory does not verify ({visible(verify.summary())})."
    problem = check_transcript(events, run_dir / TRANSCRIPT_FILE)
    if problem is not None:
        return False, f"FAIL: {visible(problem)}"
    return True, (
        f"OK: {TRANSCRIPT_FILE} matches the trajectory's model_call events line for line "
        "(each line's SHA-256 is in the signed chain)."
    )


def transcript_view(
    run_dir: Path,
    report: RunReport | StoppedRunReport | None,
    copy_to: Path | None = None,
    href: str | None = None,
) -> TranscriptView | None:
    """The run's model transcript and its verdict; None when the run has neither a
    ``model_calls.jsonl`` nor ``model_usage``. With ``copy_to``, the file is copied there
    (a regular file within :data:`RAW_MAX_BYTES`) and linked as ``href``."""
    path = run_dir / TRANSCRIPT_FILE
    has_usage = getattr(report, "model_usage", None) is not None
    present = path.is_file() and not path.is_symlink()
    if not present and not has_usage:
        return None
    ok, verdict = _verdict(run_dir, report)
    if not present:
        return TranscriptView(False, ok, verdict)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            data = f.read(READ_MAX_BYTES)
    except OSError as exc:
        return TranscriptView(True, False, f"cannot read {TRANSCRIPT_FILE}: {visible(str(exc))}")
    raw_href = None
    if copy_to is not None and href is not None and size <= RAW_MAX_BYTES:
        try:
            copy_to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy_to)
            raw_href = href
        except OSError:
            raw_href = None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    calls: list[CallView] = []
    problems: list[str] = []
    for number, raw in enumerate(lines, start=1):
        if len(calls) >= MAX_CALLS:
            break
        try:
            record = ModelCallRecord.model_validate(parse_json_line(raw))
        except (EventFormatError, pydantic.ValidationError) as exc:
            problems.append(visible(f"line {number}: {str(exc).splitlines()[0]}"))
            continue
        calls.append(_call_view(record))
    return TranscriptView(
        present=True,
        ok=ok,
        verdict=verdict,
        calls=calls,
        hidden=max(0, len(lines) - len(calls) - len(problems)),
        problems=problems,
        raw_href=raw_href,
        size=size,
    )
