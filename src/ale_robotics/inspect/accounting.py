"""What an Inspect sample did with its model and its tools, as its ALE run records it.

Inspect makes the sample's model calls itself, on the host, not through a model gateway,
so the run's account of them is Inspect's own, taken in the sample's context (where
Inspect keeps it):

* :func:`record_transcript`: each model and tool call of the sample's transcript, appended
  to the run's trajectory as a ``harness`` event with the SHA-256 of its input and output,
  as the model gateway records an agent's calls;
* :class:`UsageTally`: ``result.json``'s ``model_usage``
  (:class:`~ale_robotics.gateway.usage.ModelUsage`): the sample's tokens per model as
  Inspect counts them (what its log records as the sample's ``model_usage``), and its model
  calls: the sample's finished ``ModelEvent``\\ s that reached a provider (no error, not
  served from Inspect's cache).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from inspect_ai.event import Event, ModelEvent, ToolEvent
from inspect_ai.log import transcript

# Inspect's per-sample token account (a context variable; what the sample's log entry
# records as its model_usage). Private in Inspect, whose release the inspect extra pins.
from inspect_ai.model._model import sample_model_usage

from ale_robotics.gateway.usage import ModelTokens, ModelUsage

if TYPE_CHECKING:
    from ale_robotics.inspect.sample_run import SampleRun

__all__ = ["INSPECT_MODEL_CALL", "INSPECT_TOOL_CALL", "UsageTally", "record_transcript"]

INSPECT_MODEL_CALL = "inspect_model_call"
"""Trajectory event kind of one model call of an Inspect sample."""
INSPECT_TOOL_CALL = "inspect_tool_call"
"""Trajectory event kind of one tool call of an Inspect sample."""


class UsageTally:
    """The sample's model use so far (module docstring), read in the sample's context.

    ``budget_tokens``: the sample's token limit (Inspect's ``--token-limit``), if any;
    ``log``: the Inspect log that holds every call (``model_usage.transcript``).
    """

    def __init__(self, *, budget_tokens: int | None, log: str | None) -> None:
        self._budget = budget_tokens
        self._log = log or ""
        self._calls: Counter[str] = Counter()
        self._seen = 0
        """Events of the transcript counted (a pending model call and those after it wait)."""

    def update(self) -> ModelUsage:
        """The account as of now: call it from the sample's own task (a tool call, the
        scorer, the sandbox's cleanup), where Inspect's context variables are its."""
        for event in transcript().history.events_from(self._seen):
            if isinstance(event, ModelEvent):
                if event.pending:
                    break
                if event.error is None and event.cache != "read":
                    self._calls[event.model] += 1
            self._seen += 1
        try:
            tokens = sample_model_usage()
        except LookupError:  # outside a sample (no account): nothing used
            tokens = {}
        per_model: dict[str, ModelTokens] = {}
        for name in sorted(set(tokens) | set(self._calls)):
            usage = tokens.get(name)
            per_model[name] = ModelTokens(
                calls=self._calls[name],
                tokens_in=0
                if usage is None
                else usage.input_tokens
                + (usage.input_tokens_cache_read or 0)
                + (usage.input_tokens_cache_write or 0),
                tokens_out=0 if usage is None else usage.output_tokens,
            )
        tokens_in = sum(m.tokens_in for m in per_model.values())
        tokens_out = sum(m.tokens_out for m in per_model.values())
        return ModelUsage(
            calls=sum(m.calls for m in per_model.values()),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            budget_tokens=self._budget,
            budget_exhausted=self._budget is not None and tokens_in + tokens_out >= self._budget,
            per_model=per_model,
            transcript=self._log,
        )


def record_transcript(run: SampleRun, events: Iterable[Event]) -> int:
    """Append each model and tool call of ``events`` to the run's trajectory; how many."""
    model_calls = tool_calls = 0
    for event in events:
        if isinstance(event, ModelEvent):
            run.record(
                INSPECT_MODEL_CALL,
                {
                    "call": model_calls,
                    "model": event.model,
                    "time": event.timestamp.isoformat(),
                    "input_sha256": _digest([m.model_dump(mode="json") for m in event.input]),
                    "output_sha256": _digest(event.output.model_dump(mode="json")),
                    "tokens_in": event.output.usage.input_tokens if event.output.usage else 0,
                    "tokens_out": event.output.usage.output_tokens if event.output.usage else 0,
                    "error": event.error,
                },
            )
            model_calls += 1
        elif isinstance(event, ToolEvent):
            run.record(
                INSPECT_TOOL_CALL,
                {
                    "call": tool_calls,
                    "function": event.function,
                    "time": event.timestamp.isoformat(),
                    "arguments_sha256": _digest(event.arguments),
                    "result_sha256": _digest(_jsonable(event.result)),
                    "error": event.error.message if event.error is not None else None,
                },
            )
            tool_calls += 1
    return model_calls + tool_calls


def _jsonable(value: object) -> object:
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _digest(value: object) -> str:
    """SHA-256 of ``value`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
