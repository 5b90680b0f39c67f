"""An interactive task's floor: an eval session abandoned before its first step.

The evaluator opens an eval session of the task on the run's own hidden seeds, with
fresh envs and the same stepper as the agent's (:func:`.envs.make_stepper`), and closes
it at once. Closing an unfinished eval session completes every episode with the task's
null action from its hidden-seed reset (:meth:`.vector.Session.close`), exactly as it
completes an agent's: so the floor is, by construction, what an agent scores by doing
nothing (:mod:`..results.floor` says why a result carries it). An episode depends on its
seed only, so how many envs play the episodes does not change them.

The session records into a sink of its own (:class:`_FloorSink`), never into the run's
record: no job row, no signed event of its own (the floor is signed inside the run's
``result`` event), no practice steps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from ale_robotics.evaluator.results.builder import session_outcomes
from ale_robotics.evaluator.results.floor import floor_of
from ale_robotics.evaluator.results.metrics import NonFiniteMetric
from ale_robotics.evaluator.sessions.envs import make_envs
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.model.result import EpisodeRecord, Floor
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["measure_floor"]

_MAX_ENVS = 16
"""Envs that play the floor's episodes at once (a native stepper steps them together)."""


class _FloorSink:
    """An eval sink that keeps the episodes and nothing else."""

    def __init__(self, seeds: Sequence[HiddenSeed]) -> None:
        self._seeds = list(seeds)
        self.records: list[EpisodeRecord] = []
        self.failure: str | None = None

    @property
    def seeds(self) -> Sequence[HiddenSeed]:
        return self._seeds

    def heartbeat(self) -> None:
        return None

    def episode_ended(self, record: EpisodeRecord, done: int) -> None:
        return None

    def finish(
        self,
        records: Iterable[EpisodeRecord],
        env_steps: int,
        failure: str | None,
        infrastructure: bool = False,
    ) -> None:
        self.records = sorted(records, key=lambda r: r.index)
        self.failure = failure


def measure_floor(
    task: TaskSpec, seeds: Sequence[HiddenSeed], abort: threading.Event | None = None
) -> tuple[Floor | None, str]:
    """``(floor, "")`` of ``task`` on ``seeds`` (the run's hidden seeds), or ``(None, why)``.

    Never raises for the envs' sake: a floor that cannot be measured leaves the score
    as it is, with the reason beside it.
    """
    if not seeds:
        return None, "no floor: the session had no episodes"
    sink = _FloorSink(seeds)
    try:
        most = task.session.max_envs_per_session if task.session is not None else _MAX_ENVS
        envs = make_envs(task, min(len(seeds), _MAX_ENVS, most))
        session = Session("floor", task, SessionKind.EVAL, envs, recorder=sink)
        session.close("the floor: abandoned before its first step", abort=abort)
    except Exception as exc:  # an env that fails to build or step: no floor, said so
        return None, f"the floor could not be measured: {type(exc).__name__}: {exc}"
    if sink.failure is not None:
        return None, f"the floor could not be measured: {sink.failure}"
    try:
        return floor_of(task, session_outcomes(sink.records), "null_action"), ""
    except NonFiniteMetric as exc:
        return None, f"the floor could not be measured: {exc}"
