"""The tasks one evaluator serves, as it runs them.

Every service looks tasks up here rather than in the registry, so that they all
see the same thing: the one task an evaluator was started for (``--task``) or
any registered one, cut to its first episodes in a smoke run
(:mod:`.batch.smoke`), with its training budget from the manifest.
"""

from __future__ import annotations

from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.evaluator.batch.smoke import smoke_run, smoke_task
from ale_robotics.model.result import SmokeRun
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.registry import Registry, TrainingBudget
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["MAX_ID_CHARS", "TaskCatalog"]

MAX_ID_CHARS = 128
"""Longer task or job ids are refused unread: an id is echoed in NOT_FOUND messages,
and a status message travels in a size-limited trailer."""


class TaskCatalog:
    """Task lookups of one evaluator: the served task(s), smoke cuts, budgets, hashes."""

    def __init__(
        self, registry: Registry, *, task_id: str | None = None, smoke_episodes: int | None = None
    ) -> None:
        self._registry = registry
        self.task_id = task_id
        """The one task served (``--task``); None: every registered task."""
        self.smoke_episodes = smoke_episodes
        """Episodes of a smoke run (``--episodes N``); None: the official protocol."""
        self._budgets: dict[str, TrainingBudget | None] = {}

    def task(self, task_id: str) -> TaskSpec:
        """The task a request names (empty: the served one); refuses one not served here."""
        if len(task_id) > MAX_ID_CHARS:
            raise InvalidArgumentError(f"task_id is longer than {MAX_ID_CHARS} characters")
        if not task_id:
            if self.task_id is None:
                raise InvalidArgumentError("task_id is required: this evaluator serves every task")
            task_id = self.task_id
        elif self.task_id is not None and task_id != self.task_id:
            raise NotFoundError(f"this evaluator serves task {self.task_id!r}, not {task_id!r}")
        return self.spec(task_id)

    def spec(self, task_id: str) -> TaskSpec:
        """The task as this evaluator runs it: the registry's, cut short in a smoke run."""
        task = self._registry.get(task_id)
        n = self.smoke_episodes
        return task if n is None else smoke_task(task, n)

    def training_budget(self, task: TaskSpec) -> TrainingBudget | None:
        """The task's training budget (the manifest's, in agent steps too); None: none."""
        if task.id not in self._budgets:  # a smoke run cuts episodes, never the budget
            self._budgets[task.id] = self._registry.training_budget(task.id)
        return self._budgets[task.id]

    def smoke_run(self, task_id: str) -> SmokeRun | None:
        """What results of this task must say about a smoke run; None for an official one."""
        n = self.smoke_episodes
        return None if n is None else smoke_run(self._registry.get(task_id), n)

    def config_sha256(self, task_id: str) -> str:
        """The hash of the exact task config evaluated, which every result carries."""
        return self._registry.entry(task_id).sha256

    def simulator_package(self, task_id: str) -> str:
        """The task's own simulator package, whose version every result records."""
        return self._registry.get(task_id).simulator.package

    def manifest_entry(self, task_id: str) -> ManifestEntry | None:
        """The release manifest's entry for the task (its compute budget); None: none."""
        return self._registry.manifest_entry(task_id)
