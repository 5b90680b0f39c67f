"""Task metrics, computed from per-episode outcomes by name.

A task config declares its metrics by name (``metrics[].name``); the evaluator
computes each declared name with the function registered in :data:`METRICS`.
Every path that produces an ``EvalResult`` (the batch rollout, replay, an
interactive eval session, the audit's recomputation) goes through
:func:`compute`, so a new metric, such as a cost for a task whose returns are
negative, is one entry here rather than a special case in each pipeline, and the
audit recomputes it exactly as the evaluator did.

The metrics every result has carried since v0.1 (:data:`ALWAYS`) are computed
for every task, and :data:`WHEN_AVAILABLE` ones whenever every outcome carries
what they need, so results of existing tasks are unchanged by this registry;
but a task whose rollout kind says they do not apply to it
(:meth:`~ale_robotics.model.rollout_kind.RolloutKind.generic_metrics`: a planning
problem has no return, and its "length" is the validator's state count) gets only
its declared metrics (:func:`task_metrics`).
A metric whose inputs are missing is left out (never invented); the score then
says it was not measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ale_robotics.model.kind_registry import get_kind

if TYPE_CHECKING:
    from ale_robotics.model.control_loop import ControlLoop
    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "ALWAYS",
    "HOST_TIMED",
    "METRICS",
    "WHEN_AVAILABLE",
    "MetricFn",
    "NonFiniteMetric",
    "compute",
    "task_metrics",
]


class NonFiniteMetric(ValueError):
    """A metric came out NaN or inf (no outcomes, a NaN return).

    Carries the metric's name and value. The batch runner treats it as the
    submission's failure: the outcomes are a deterministic function of the frozen
    submission, so a retry would give the same value (the rollouts themselves stop
    earlier, at the non-finite action, see :func:`.batch.pipeline.check_finite`; this is
    the backstop for every other path).
    """

    def __init__(self, name: str, value: float) -> None:
        super().__init__(f"non-finite metric {name} ({value})")
        self.name = name
        self.value = value


MetricFn = Callable[[Sequence["EpisodeOutcome"]], float | None]
"""Outcomes -> value, or None when the outcomes lack what the metric needs."""


def _returns(outcomes: Sequence[EpisodeOutcome]) -> np.ndarray:
    return np.array([o.ret for o in outcomes], dtype=np.float64)


def _mean_return(outcomes: Sequence[EpisodeOutcome]) -> float:
    return float(_returns(outcomes).mean())


def _std_return(outcomes: Sequence[EpisodeOutcome]) -> float:
    return float(_returns(outcomes).std())


def _mean_cost(outcomes: Sequence[EpisodeOutcome]) -> float:
    """Minus the mean return: for tasks whose rewards are penalties (returns <= 0), so
    that the paper ratio is taken on a non-negative, lower-is-better number."""
    return -_mean_return(outcomes)


def _mean_episode_length(outcomes: Sequence[EpisodeOutcome]) -> float:
    return float(np.array([o.length for o in outcomes], dtype=np.float64).mean())


def _success_rate(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    if not outcomes or any(o.success is None for o in outcomes):
        return None
    return sum(bool(o.success) for o in outcomes) / len(outcomes)


def _mean_final_distance(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    distances = [o.final_distance for o in outcomes]
    if not outcomes or any(d is None for d in distances):
        return None
    return float(np.mean(np.array(distances, dtype=np.float64)))


def _collision_rate(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Planning tasks: fraction of problems whose returned path collides (a safety metric)."""
    if not outcomes or any(o.collided is None for o in outcomes):
        return None
    return sum(bool(o.collided) for o in outcomes) / len(outcomes)


def _mean_of(times: Sequence[float | None]) -> float | None:
    if not times or any(t is None for t in times):
        return None
    return float(np.mean(np.array(times, dtype=np.float64)))


def _planning_time(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Planning tasks: mean seconds per problem on the task's clock (wall-clock or CPU
    seconds), unsolved problems included (with the time they were given), so that giving
    up early cannot look fast."""
    return _mean_of([o.planning_time_s for o in outcomes])


def _planning_wall_time(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Planning tasks timed in CPU seconds: the mean wall-clock seconds beside them."""
    return _mean_of([o.planning_wall_time_s for o in outcomes])


def _controls(outcomes: Sequence[EpisodeOutcome]) -> list[ControlLoop] | None:
    loops = [o.control for o in outcomes]
    if not loops or any(c is None for c in loops):
        return None
    return [c for c in loops if c is not None]


def _held_command_rate(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Real-time controller kinds: the fraction of control steps that applied an older
    command than their own (late or missing: the hold schedule's steps over all steps)."""
    loops = _controls(outcomes)
    if loops is None:
        return None
    steps = sum(o.length for o in outcomes)
    return sum(c.held_steps for c in loops) / steps if steps else 0.0


def _latency_ms(outcomes: Sequence[EpisodeOutcome], field: str) -> float | None:
    loops = _controls(outcomes)
    if loops is None:
        return None
    values = [getattr(c, field) for c in loops]
    return _mean_of([None if v is None else v / 1000.0 for v in values])


def _command_latency_p50(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Real-time controller kinds: the episodes' mean median observation-to-command latency
    (milliseconds)."""
    return _latency_ms(outcomes, "latency_p50_us")


def _command_latency_p99(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Real-time controller kinds: the episodes' mean 99th-percentile latency (ms)."""
    return _latency_ms(outcomes, "latency_p99_us")


def _graph_start(outcomes: Sequence[EpisodeOutcome]) -> float | None:
    """Real-time controller kinds: the mean seconds from starting an episode's graph to its
    first control tick."""
    loops = _controls(outcomes)
    return None if loops is None else _mean_of([c.graph_start_s for c in loops])


METRICS: dict[str, MetricFn] = {
    "mean_return": _mean_return,
    "std_return": _std_return,
    "mean_episode_length": _mean_episode_length,
    "mean_cost": _mean_cost,
    "success_rate": _success_rate,
    "mean_final_distance": _mean_final_distance,
    "collision_rate": _collision_rate,
    "planning_time": _planning_time,
    "planning_wall_time": _planning_wall_time,
    "held_command_rate": _held_command_rate,
    "command_latency_p50_ms": _command_latency_p50,
    "command_latency_p99_ms": _command_latency_p99,
    "graph_start_s": _graph_start,
}
"""Every metric name a task config may declare, with how it is computed."""

HOST_TIMED = frozenset(
    {
        "planning_time",
        "planning_wall_time",
        "command_latency_p50_ms",
        "command_latency_p99_ms",
        "graph_start_s",
    }
)
"""Metrics measured in time (wall-clock or CPU): they depend on the host (and wall-clock
time on its load), so a re-run (an audit) reproduces them only approximately, while every
other metric is exact."""

ALWAYS = ("mean_return", "std_return", "mean_episode_length")
"""Computed for every task."""

WHEN_AVAILABLE = ("success_rate", "mean_final_distance")
"""Computed for every task whose outcomes all carry their inputs."""


def compute(
    outcomes: Sequence[EpisodeOutcome], names: Iterable[str] = (), *, generic: bool = True
) -> dict[str, float]:
    """The metrics of ``outcomes``: :data:`ALWAYS`, :data:`WHEN_AVAILABLE` (unless not
    ``generic``), plus ``names``.

    ``names`` are the task's declared metrics; a name :data:`METRICS` does not know
    is skipped here (the registry tests refuse such configs). Raises
    :class:`NonFiniteMetric` (a ``ValueError``) for a non-finite value.
    """
    out: dict[str, float] = {}
    for name in dict.fromkeys([*((*ALWAYS, *WHEN_AVAILABLE) if generic else ()), *names]):
        fn = METRICS.get(name)
        value = None if fn is None else fn(outcomes)
        if value is not None:
            out[name] = value
    for name, value in out.items():
        if not math.isfinite(value):
            raise NonFiniteMetric(name, value)
    return out


def task_metrics(outcomes: Sequence[EpisodeOutcome], task: TaskSpec) -> dict[str, float]:
    """The metrics of a job of ``task``: its declared ones, and the generic ones unless its
    rollout kind says they do not apply to it (every path that makes or re-checks a task's
    result computes them here, so they agree)."""
    generic = get_kind(task.eval.rollout).generic_metrics(task)
    return compute(outcomes, (m.name for m in task.metrics), generic=generic)
