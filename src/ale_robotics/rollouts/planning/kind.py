"""The planning kinds, ``planner`` and ``edmp``: hidden-seed problems, no policy, no env.

Both run the same problems (:func:`.problems.planning_episodes`: generate from
the hidden seed, plan, time, validate densely) and differ in what the agent
submits and who plans:

* ``planner`` (batch): ``planner.yaml``, an OMPL planner configuration, run by
  the evaluator in planner processes;
* ``edmp`` (read-from-task-config): ``edmp_config.yaml``, the agent's copy of the
  task's settings for the evaluator's own trajectory generator.

Their task-config rules (:meth:`PlanningKind.check_task`) are the ones the
problems rely on: a ``planning`` section with exactly this kind's part, one
YAML file in the contract, the planning metrics declared, and all problems in
one shard so that measured planning times are never shared with another
problem of the same job.

Tasks timed in CPU seconds (``planning.clock: cpu``, from the v2 tasks) declare
``planning_wall_time`` too, and their results carry only their declared metrics
(:meth:`PlanningKind.generic_metrics`): a problem has no return, and the
"episode length" would be the validator's state count. The v1 tasks keep both as
their recorded results have them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import BatchOutcomes, PlanningOutcomes
from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, RolloutKind, Shard
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.planning.edmp_config import FILE_NAME as EDMP_FILE
from ale_robotics.planning.planner_config import FILE_NAME as PLANNER_FILE
from ale_robotics.rollouts.planning.problems import load_planning_artifact, planning_episodes
from ale_robotics.tasks.contract import FileFormat
from ale_robotics.tasks.spec import TaskMode, TaskSpec

__all__ = ["CPU_CLOCK_METRICS", "PLANNING_METRICS", "EdmpKind", "PlannerKind", "PlanningKind"]

PLANNING_METRICS = frozenset({"success_rate", "collision_rate", "planning_time"})
"""Metrics every planning task must declare (what :func:`.problems.planning_episodes` measures)."""
CPU_CLOCK_METRICS = PLANNING_METRICS | {"planning_wall_time"}
"""... and every task timed in CPU seconds (the wall-clock seconds beside them)."""


class PlanningKind(RolloutKind):
    """What ``planner`` and ``edmp`` share; a subclass names its mode, file and section."""

    settings = frozenset({"planning"})

    mode: ClassVar[TaskMode]
    """The task mode this kind's tasks have."""
    file_name: ClassVar[str]
    """The one YAML file the contract names."""

    def check_task(self, task: TaskSpec) -> None:
        """Raise ValueError unless ``task`` is shaped the way :mod:`.problems` reads it."""
        planning = task.planning
        if planning is None:
            raise ValueError(
                f"task {task.id}: 'planning' settings go with eval.backend 'planner' or 'edmp'"
            )
        ev = task.eval
        where = f"task {task.id} (eval.backend {self.name})"
        if task.mode is not self.mode or task.genre != "planning" or task.policy is not None:
            raise ValueError(
                f"{where}: must be a {self.mode} task of genre 'planning' with no policy"
            )
        files = task.contract.files if task.contract is not None else []
        if len(files) != 1 or files[0].names != {self.file_name: FileFormat.YAML}:
            raise ValueError(f"{where}: the contract is exactly one YAML file, {self.file_name}")
        sections = {"planner": planning.planner is not None, "edmp": planning.edmp is not None}
        if sections != {section: section == self.name for section in sections}:
            raise ValueError(f"{where}: set planning.{self.name} (and only that)")
        required = CPU_CLOCK_METRICS if planning.clock == "cpu" else PLANNING_METRICS
        missing = required - {m.name for m in task.metrics}
        if missing:
            raise ValueError(f"{where}: metrics {sorted(missing)} are missing")
        if ev.envs_per_shard < ev.episodes:
            raise ValueError(f"{where}: eval.envs_per_shard must cover all episodes (one shard)")

    def generic_metrics(self, task: TaskSpec) -> bool:
        """Only the v1 tasks (wall clock) report return and length, as recorded."""
        return task.planning is None or task.planning.clock == "wall"

    def load_artifact(self, files: list[SnapshotFile], task: TaskSpec) -> Artifact:
        """The validated configuration as canonical JSON bytes (see :mod:`.problems`)."""
        return dict(load_planning_artifact(files, task))

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        return planning_episodes(task, artifact, seeds, on_episode)

    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        return PlanningOutcomes.from_episodes(self.name, outcomes)


class PlannerKind(PlanningKind):
    """A submitted OMPL planner configuration (``panda-planner-config-v1``)."""

    name = "planner"
    mode = TaskMode.BATCH
    file_name = PLANNER_FILE


class EdmpKind(PlanningKind):
    """The agent's copy of the task's EDMP settings (``edmp-v1``)."""

    name = "edmp"
    mode = TaskMode.TASK_CONFIG
    file_name = EDMP_FILE
