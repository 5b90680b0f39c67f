"""A batch job's floor: its task's null artifact run on the job's own hidden seeds.

Run by the runner after the submission's episodes, on the same executor, with the
same episode plan and shard layout (:mod:`..results.floor` says what a floor is and
why). The official measurement's wall time and steps are taken before it starts, so
the floor never shows in the job's timings; it shares the job's deadline.

A floor that cannot be measured (a worker crash, the deadline, a non-finite metric)
never fails the job: the result then carries no floor and a note saying why. Losing
the job (cancelled, lease lost, the evaluator stopping) stops it as it stops the
official episodes (:class:`~.execution.RolloutAborted`, raised through).
"""

from __future__ import annotations

from collections.abc import Callable

from ale_robotics.evaluator.execution import WorkerCrashed
from ale_robotics.evaluator.results.floor import floor_of
from ale_robotics.evaluator.results.metrics import NonFiniteMetric
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.result import Floor
from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["measure_floor"]

RunEpisodes = Callable[[Artifact], list[EpisodeOutcome]]
"""Runs an artifact on the job's episode plan (the runner's executor call)."""


def measure_floor(task: TaskSpec, run: RunEpisodes) -> tuple[Floor | None, str]:
    """``(floor, "")``, or ``(None, why there is none)``."""
    kind = get_kind(task.eval.rollout)
    null = kind.null_artifact(task)
    if null is None:
        return None, (
            f"no floor: a submission of the {kind.name} kind has no null version that "
            "measures doing nothing"
        )
    try:
        return floor_of(task, run(null), kind.floor_policy), ""
    except (WorkerCrashed, TimeoutError, PolicyFault, NonFiniteMetric) as exc:
        return None, f"the floor could not be measured: {exc}"
