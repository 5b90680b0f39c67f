"""The task registry: configs shipped as package data, plus third-party tasks by entry point.

A :class:`Registry` is an ordinary object (no module-level mutable state), so tests
build their own instead of cleaning a global one. Configs are parsed lazily and
cached per registry.

It also joins a task with its manifest entry where the two together mean something:
the paper target (:meth:`Registry.target`) and the training budget in the paper's
unit and in agent steps (:meth:`Registry.training_budget`, :class:`TrainingBudget`),
which the evaluator enforces on practice sessions and GetSpec, the CLI and the
report describe with :meth:`TrainingBudget.describe`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module, metadata, resources
from pathlib import Path

from pydantic import ValidationError

from ale_robotics.errors import ConfigError, TaskNotFoundError
from ale_robotics.tasks.manifest import (
    ManifestEntry,
    PaperTarget,
    ReleaseManifest,
    active_manifest,
    config_sha256,
)
from ale_robotics.tasks.scorable import check_scorable
from ale_robotics.tasks.spec import TaskSpec, TrainingStepUnit

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registry",
    "TaskEntry",
    "TrainingBudget",
    "action_repeat",
    "budget_for",
    "default_registry",
]

_UNIT_WORDS = {
    TrainingStepUnit.AGENT_STEP: "agent steps",
    TrainingStepUnit.SIMULATOR_STEP: "simulator steps",
}

ENTRY_POINT_GROUP = "ale_robotics.tasks"
"""Third-party packages register a callable returning the path of a task config JSON."""


@dataclass(frozen=True)
class TaskEntry:
    """A task config as found, with the exact bytes its manifest hash is taken over."""

    spec: TaskSpec
    raw: bytes
    origin: str

    @property
    def sha256(self) -> str:
        return config_sha256(self.raw)


class Registry:
    """Task configs by id, and the release manifest that gives them targets and budgets."""

    def __init__(
        self,
        config_files: dict[str, bytes] | None = None,
        manifest: ReleaseManifest | None = None,
    ) -> None:
        self._raw: dict[str, tuple[bytes, str]] = {}
        self._cache: dict[str, TaskEntry] = {}
        if config_files is not None:
            for origin, raw in config_files.items():
                self._add(raw, origin)
        self._manifest = manifest

    @classmethod
    def bundled(cls, manifest: ReleaseManifest | None = None) -> Registry:
        """The tasks shipped in ``ale_robotics/tasks/configs`` and registered by entry points."""
        files: dict[str, bytes] = {}
        root = resources.files("ale_robotics.tasks") / "configs"
        for item in sorted(root.iterdir(), key=lambda p: p.name):
            if item.name.endswith(".json"):
                files[f"ale_robotics/tasks/configs/{item.name}"] = item.read_bytes()
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            path = Path(ep.load()())
            files[f"{ep.value} ({path})"] = path.read_bytes()
        if manifest is None:
            manifest, _ = active_manifest()
        return cls(files, manifest)

    def _add(self, raw: bytes, origin: str) -> None:
        try:
            task_id = json.loads(raw)["id"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"task config {origin} has no readable 'id': {exc}") from exc
        if task_id in self._raw:
            raise ConfigError(
                f"task {task_id} is defined twice: {self._raw[task_id][1]} and {origin}"
            )
        self._raw[task_id] = (raw, origin)

    def ids(self) -> list[str]:
        return sorted(self._raw)

    def __iter__(self) -> Iterator[TaskEntry]:
        return (self.entry(i) for i in self.ids())

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._raw

    def entry(self, task_id: str) -> TaskEntry:
        if task_id not in self._raw:
            close = difflib.get_close_matches(task_id, self.ids(), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise TaskNotFoundError(
                f"unknown task {task_id!r}{hint} (run 'ale-robotics tasks list' to see all)"
            )
        if task_id not in self._cache:
            raw, origin = self._raw[task_id]
            try:
                spec = TaskSpec.model_validate_json(raw)
            except ValidationError as exc:
                raise ConfigError(f"task config {origin} ({task_id}) is invalid: {exc}") from exc
            if spec.id != task_id:
                raise ConfigError(f"task config {origin}: id {spec.id!r} != {task_id!r}")
            self._cache[task_id] = TaskEntry(spec=spec, raw=raw, origin=origin)
        return self._cache[task_id]

    def get(self, task_id: str) -> TaskSpec:
        return self.entry(task_id).spec

    @property
    def manifest(self) -> ReleaseManifest | None:
        return self._manifest

    def manifest_entry(self, task_id: str) -> ManifestEntry | None:
        """The manifest's entry for a task, refused when it was made for another config."""
        entry = self.entry(task_id)
        if self._manifest is None or task_id not in self._manifest.tasks:
            return None
        m = self._manifest.tasks[task_id]
        if m.config_sha256 != entry.sha256:
            raise ConfigError(
                f"manifest {self._manifest.release} entry for {task_id} was made for config "
                f"sha256 {m.config_sha256[:12]}..., but the installed config is "
                f"{entry.sha256[:12]}...: sync a manifest made for this task version"
            )
        if m.version != entry.spec.version:
            raise ConfigError(
                f"manifest entry for {task_id} says version {m.version}; the config is "
                f"version {entry.spec.version}"
            )
        if m.target is not None and m.target.metric != entry.spec.primary_metric.name:
            raise ConfigError(
                f"manifest target for {task_id} is for metric {m.target.metric!r}; the task's "
                f"primary metric is {entry.spec.primary_metric.name!r}"
            )
        return m

    def check_manifest(self, manifest: ReleaseManifest) -> None:
        """Refuse a manifest that names an unknown task or was made for other configs."""
        candidate = Registry({}, manifest)
        candidate._raw = self._raw
        for task_id in manifest.tasks:
            if task_id not in self._raw:
                raise ConfigError(
                    f"manifest {manifest.release} has an entry for {task_id!r}, "
                    "which is not an installed task"
                )
            candidate.target(task_id)  # hash, version and scorability checks
            newer = manifest.tasks[task_id].superseded_by
            if newer is not None:
                _check_successor(manifest, task_id, newer)

    def superseded_by(self, task_id: str) -> str | None:
        """The id of the task's newer version when the manifest says one replaced it."""
        if self._manifest is None or task_id not in self._manifest.tasks:
            return None
        return self._manifest.tasks[task_id].superseded_by

    def training_budget(self, task_id: str) -> TrainingBudget | None:
        """The task's training budget from its manifest entry; None when it declares none."""
        return budget_for(self.get(task_id), self.manifest_entry(task_id))

    def target(self, task_id: str) -> PaperTarget | None:
        """The paper target, refused when it would make the score's ratio meaningless."""
        m = self.manifest_entry(task_id)
        target = None if m is None else m.target
        check_scorable(self.get(task_id), target)
        return target


def _check_successor(manifest: ReleaseManifest, task_id: str, newer: str) -> None:
    """A task is superseded by a newer version of itself that the manifest also lists:
    same id but for the ``-vN`` suffix, a higher N."""
    stem, _, version = task_id.rpartition("-v")
    new_stem, _, new_version = newer.rpartition("-v")
    if newer not in manifest.tasks:
        raise ConfigError(
            f"manifest {manifest.release}: {task_id} is superseded by {newer!r}, which the "
            "manifest does not list"
        )
    if new_stem != stem or not (new_version.isdigit() and int(new_version) > int(version)):
        raise ConfigError(
            f"manifest {manifest.release}: {task_id} can only be superseded by a newer version "
            f"of itself ({stem}-vN with N > {version}), not {newer!r}"
        )


def action_repeat(task: TaskSpec) -> int:
    """Simulator steps per agent step of the task's env (its registered ``action_repeat``).

    Read from the Gymnasium registration (``ale_robotics.envs`` registers
    TD-MPC2's envs with ``action_repeat=2``) with the task's own env kwargs on
    top, so the figure is the one the env actually applies.
    """
    import gymnasium as gym

    gym_id = task.env.gym_id
    if ":" in gym_id:  # Gymnasium's "module:id": the module registers the id
        module, gym_id = gym_id.split(":", 1)
        import_module(module)
    spec = gym.registry.get(gym_id)
    kwargs = {**(spec.kwargs if spec is not None else {}), **task.env.kwargs}
    repeat = kwargs.get("action_repeat", 1)
    return repeat if isinstance(repeat, int) and repeat >= 1 else 1


@dataclass(frozen=True)
class TrainingBudget:
    """A task's training budget, in the paper's unit and in agent steps."""

    steps: int
    """``compute_budget.training_steps`` as the manifest gives it."""
    unit: TrainingStepUnit
    """The unit ``steps`` is in (the task's ``session.training_step_unit``)."""
    action_repeat: int
    """Simulator steps per agent step of the task's env."""
    simulator: str
    """The task's simulator, for the text ('mujoco', 'dm_control'...)."""
    enforced: bool
    """Whether the evaluator counts and enforces it (interactive tasks, and tasks whose
    training.simulator is "evaluator")."""

    @property
    def agent_steps(self) -> int:
        """The budget as agent steps (Step calls x envs over all practice sessions)."""
        if self.unit is TrainingStepUnit.SIMULATOR_STEP:
            return self.steps // self.action_repeat
        return self.steps

    @property
    def unit_words(self) -> str:
        return _UNIT_WORDS[self.unit]

    def describe(self) -> str:
        """The budget in words: value, unit, its agent steps, and who enforces it."""
        head = f"{self.steps:,} {self.unit_words}"
        if self.unit is TrainingStepUnit.SIMULATOR_STEP:
            head += f" = {self.agent_steps:,} agent steps at action repeat {self.action_repeat}"
        elif self.action_repeat > 1:
            head += (
                f" ({self.steps * self.action_repeat:,} {self.simulator} simulator steps: the "
                f"task's env repeats each action {self.action_repeat} times within one agent step)"
            )
        if not self.enforced:
            return f"{head}; declared, not counted: this task trains in the agent's sandbox"
        return (
            f"{head}; an agent step is one env of one Step call of a practice session "
            f"(num_envs per Step, autoreset steps included), summed over every practice "
            "session of the run; eval sessions do not count"
        )


def budget_for(task: TaskSpec, entry: ManifestEntry | None) -> TrainingBudget | None:
    """The task's training budget from its manifest entry; None when it declares none."""
    if entry is None or entry.compute_budget.training_steps is None:
        return None
    # Counted where the agent can only train in practice sessions: an interactive task, or
    # one whose simulator is the evaluator's (training.simulator "evaluator", a batch task too).
    counted = task.evaluator_counts_training
    unit = task.session.training_step_unit if task.session is not None else None
    return TrainingBudget(
        steps=entry.compute_budget.training_steps,
        unit=unit or TrainingStepUnit.AGENT_STEP,
        action_repeat=action_repeat(task) if counted else 1,
        simulator=task.simulator.name,
        enforced=counted,
    )


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """The bundled registry, built once per process (configs are immutable package data)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry.bundled()
    return _DEFAULT
