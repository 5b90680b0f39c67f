"""What each agent of an eval set spent on its model, beside what it scored.

A score alone ranks an agent that calls its model a thousand times with one that calls it
ten; HAL (the Holistic Agent Leaderboard) reports cost beside accuracy for that reason,
and the agents it compares on its plots are those on the Pareto frontier of the two. Here
the cost is the model's tokens (input + output) per run, as each run's model gateway
counted them (``result.json``'s ``model_usage``; Inspect's own accounting for an Inspect
sample), with its calls.

Per agent (label), across the set's tasks: the mean tokens per run with a stratified-
bootstrap interval over the repetitions within each task (the same resampling as the
scores', :mod:`.rliable_api`), over the same runs the score aggregate uses (scored and
verified), and the mean calls per run. A run whose calls no gateway counted (an agent
without a model, or run without ``--model-upstream``) has no cost, not a cost of 0: it is
left out of the tokens and counted in ``runs_uncounted``; an agent with no counted run on
some task has no mean (it could not be compared with one that has), and says why.

The frontier: an agent is on it when no other agent scores at least as high (its mean
score across tasks) with no more tokens per run, and better in one of the two. Only
agents with both numbers are placed. The mean score, not the IQM: the point is the
expected score of a run beside the expected tokens of a run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.evalset import rliable_api
from ale_robotics.evalset.interval import Interval
from ale_robotics.evalset.spec import BootstrapSettings

__all__ = ["LabelCost", "label_costs", "no_cost_reason", "pareto_frontier"]


class LabelCost(BaseModel):
    """One agent's model use across the set's tasks, beside its score (frozen)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    runs_counted: int = Field(
        description="Scored runs whose model calls a gateway counted: the tokens' sample."
    )
    runs_uncounted: int = Field(
        description="Scored runs whose calls nothing counted (no model gateway): left out "
        "of the tokens, never counted as 0."
    )
    tokens: Interval | None = Field(
        description="Mean model tokens (input + output) per run across tasks, with its "
        "stratified-bootstrap interval; None when some task has no counted run."
    )
    calls: float | None = Field(description="Mean model calls per run, over the same runs.")
    score: Interval | None = Field(
        description="The agent's mean score across tasks (its 'mean' in agents), the other "
        "coordinate of the frontier; None without one."
    )
    pareto: bool | None = Field(
        description="On the score-vs-tokens Pareto frontier (no other agent scores at least "
        "as high with no more tokens, and better in one); None when not placed (no tokens "
        "or no score)."
    )
    note: str | None = Field(default=None, description="Why it has no tokens, when it has none.")


def pareto_frontier(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The labels of ``points`` (label -> (score, tokens)) that no other one dominates
    (a score at least as high with no more tokens, better in one), fewest tokens first."""

    def dominated(label: str) -> bool:
        score, tokens = points[label]
        return any(
            s >= score and t <= tokens and (s > score or t < tokens)
            for other, (s, t) in points.items()
            if other != label
        )

    return sorted((k for k in points if not dominated(k)), key=lambda k: points[k][1])


def _matrix(per_task: Sequence[Sequence[int]]) -> np.ndarray:
    """The (runs x tasks) matrix of the first ``k`` counted runs of each task, ``k`` the
    fewest any task has (the score matrix's rule, :func:`.aggregate._agent_matrix`)."""
    k = min(len(values) for values in per_task)
    return np.array([list(values[:k]) for values in per_task], dtype=np.float64).T


def label_costs(
    labels: Sequence[str],
    tasks: Sequence[str],
    counted: Mapping[tuple[str, str], Sequence[tuple[int, int]]],
    uncounted: Mapping[str, int],
    scores: Mapping[str, Interval | None],
    bootstrap: BootstrapSettings,
) -> list[LabelCost]:
    """Each label's :class:`LabelCost`: ``counted`` holds, per (task, label), the (tokens,
    calls) of its scored runs that a gateway counted, in repetition order; ``uncounted``
    the scored runs it did not count, per label; ``scores`` each label's mean score
    across tasks (None without one)."""
    costs: list[LabelCost] = []
    placed: dict[str, tuple[float, float]] = {}
    for label in labels:
        per_task = [list(counted.get((task, label), ())) for task in tasks]
        missing = [task for task, values in zip(tasks, per_task, strict=True) if not values]
        tokens: Interval | None = None
        calls: float | None = None
        note = None
        if missing and any(per_task):
            note = (
                f"no run counted by a model gateway on {', '.join(missing)}: no tokens per "
                "run across tasks"
            )
        elif missing:
            note = "no run of it was counted by a model gateway: no tokens (not 0)"
        else:
            matrix = _matrix([[t for t, _ in values] for values in per_task])
            points, cis = rliable_api.interval_estimate(
                matrix,
                ("mean",),
                reps=bootstrap.reps,
                confidence=bootstrap.confidence,
                seed=bootstrap.seed,
            )
            tokens = Interval(value=float(points[0]), low=float(cis[0, 0]), high=float(cis[1, 0]))
            calls = float(np.mean(_matrix([[c for _, c in values] for values in per_task])))
        score = scores.get(label)
        if tokens is not None and score is not None:
            placed[label] = (score.value, tokens.value)
        costs.append(
            LabelCost(
                label=label,
                runs_counted=sum(len(values) for values in per_task),
                runs_uncounted=uncounted.get(label, 0),
                tokens=tokens,
                calls=calls,
                score=score,
                pareto=None,
                note=note,
            )
        )
    frontier = set(pareto_frontier(placed))
    return [
        c.model_copy(update={"pareto": c.label in frontier}) if c.label in placed else c
        for c in costs
    ]


def no_cost_reason(costs: Sequence[LabelCost]) -> str | None:
    """Why the set has no score-vs-tokens plot (None when it has one: some agent has both
    a score and tokens per run)."""
    if any(c.pareto is not None for c in costs):
        return None
    if not any(c.runs_counted for c in costs):
        return (
            "no run of the set had its model calls counted (none ran with a model gateway, "
            "'run --model-upstream'): no tokens to set against the scores"
        )
    return (
        "no agent has both a mean score across tasks and tokens per run on every task: "
        "nothing to place against the others"
    )
