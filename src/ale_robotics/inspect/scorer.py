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
and output, and Inspect's account of its model use becomes ``result.json``'s
``model_usage`` (:mod:`.accounting`). A sample Inspect ran again after its run was scored
(a retry) has no run of its own: its score is that run's (:mod:`.retry`).
"""

from __future__ import annotations

from typing import Any

from inspect_ai.scorer import NOANSWER, Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox

from ale_robotics.harness.verdict import RunOutcome
from ale_robotics.inspect.sandbox import AleSandboxEnvironment

__all__ = ["REPORTED_AGAIN", "ale_scorer", "score_of"]

REPORTED_AGAIN = (
    "Inspect ran this sample again (a retry) after its ALE run was scored; a retry starts "
    "no new run, so this is that run's score."
)
"""The explanation's first sentence for a retried sample."""


@scorer(metrics=[mean(), stderr()])
def ale_scorer() -> Scorer:
    """The sample's ALE run, ended and scored by the harness (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        del state, target  # the evaluator measures; nothing the agent said is scored
        env = sandbox().as_type(AleSandboxEnvironment)
        if env.earlier is not None:
            return score_of(env.earlier, reported_again=True)
        return score_of(await env.end_run())

    return score


def score_of(outcome: RunOutcome, *, reported_again: bool = False) -> Score:
    """The Inspect score of a run's verdict (``reported_again``: for a retried sample)."""
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
        "model_usage": (
            report.model_usage.model_dump(mode="json") if report.model_usage is not None else None
        ),
        "reported_again": reported_again,
    }
    explanation = verdict.explanation
    if reported_again:
        explanation = f"{REPORTED_AGAIN} {explanation}"
    return Score(
        value=verdict.score if verdict.score is not None else NOANSWER,
        answer=None,
        explanation=explanation,
        metadata=metadata,
    )
