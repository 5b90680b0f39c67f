"""The scorer of an ALE sample: the run's official verdict, as the harness reached it.

It ends the run the way ``ale-robotics run`` does when its agent exits: the toolbox
exits 0, the harness closes the agent's sessions, submits a task-config task's edited
copy, waits for the run's jobs, reads the official ``EvalResult`` on its own harness
channel and scores it (:func:`ale_robotics.harness.verdict.score_run`). The sample's
score is that score, never anything the agent said; its explanation the score's; its
metadata what a reader checks (metrics, target and source, the gate's checks, abandoned
episodes, the run directory, whether the result is official). A task without a paper
target reports its metrics with no value (Inspect's ``NOANSWER``).

Before the run ends, each model and tool call of the sample (Inspect's transcript) is
appended to the run's trajectory as a ``harness`` event with the SHA-256 of its input
and output (:func:`record_transcript`), as the model gateway records an agent's calls.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import anyio
from inspect_ai.event import Event, ModelEvent, ToolEvent
from inspect_ai.log import transcript
from inspect_ai.scorer import NOANSWER, Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox

from ale_robotics.harness.verdict import RunOutcome
from ale_robotics.inspect.sample_run import SampleRun
from ale_robotics.inspect.sandbox import AleSandboxEnvironment

__all__ = [
    "INSPECT_MODEL_CALL",
    "INSPECT_TOOL_CALL",
    "ale_scorer",
    "record_transcript",
    "score_of",
]

INSPECT_MODEL_CALL = "inspect_model_call"
"""Trajectory event kind of one model call of an Inspect sample."""
INSPECT_TOOL_CALL = "inspect_tool_call"
"""Trajectory event kind of one tool call of an Inspect sample."""


@scorer(metrics=[mean(), stderr()])
def ale_scorer() -> Scorer:
    """The sample's ALE run, ended and scored by the harness (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        del state, target  # the evaluator measures; nothing the agent said is scored
        env = sandbox().as_type(AleSandboxEnvironment)
        record_transcript(env.run, transcript().events)
        outcome = await anyio.to_thread.run_sync(env.run.finish)
        return score_of(outcome)

    return score


def score_of(outcome: RunOutcome) -> Score:
    """The Inspect score of a run's verdict."""
    report = outcome.report
    verdict = report.score
    result = report.eval_result
    metadata: dict[str, Any] = {
        "run_id": outcome.run_id,
        "run_dir": str(outcome.run_dir),
        "task_id": report.task_id,
        "official": report.official,
        "status": verdict.status,
        "score_line": outcome.score_line,
        "metrics": dict(result.metrics) if result is not None else {},
        "job_state": report.job_state,
        "target": verdict.target_value,
        "target_source": (
            verdict.target_source.model_dump(mode="json") if verdict.target_source else None
        ),
        "primary_metric": verdict.primary_metric,
        "gate": verdict.gate.model_dump(mode="json") if verdict.gate is not None else None,
        "abandoned_episodes": verdict.abandoned_episodes,
        "agent_budget_exceeded": report.agent_budget_exceeded,
    }
    return Score(
        value=verdict.score if verdict.score is not None else NOANSWER,
        answer=None,
        explanation=verdict.explanation,
        metadata=metadata,
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
