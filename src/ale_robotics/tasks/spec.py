"""The task config and the submission contract, as versioned pydantic models.

A task config is data shipped with the package (``tasks/configs/<id>.json``);
what a run needs to know about a task (its simulator, its evaluation protocol,
what an agent must submit) is read from it, never from code. Paper targets and
compute budgets are *not* here: they come from the release manifest
(:mod:`ale_robotics.tasks.manifest`), so that a config and its target can be
audited separately.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ale_robotics.model.kind_registry import ENTRY_POINT_GROUP, get_kind, kind_names
from ale_robotics.planning.settings import PlanningSettings
from ale_robotics.tasks.contract import PolicyArchitecture, SubmissionContract
from ale_robotics.tasks.scoring_config import ScoringConfig

__all__ = [
    "KIND_SETTINGS",
    "CheckpointSettings",
    "Direction",
    "EnvSpec",
    "EvalProtocol",
    "MetricRole",
    "MetricSpec",
    "PaperRef",
    "SessionSettings",
    "SimulatorSpec",
    "TaskMode",
    "TaskSpec",
    "TrainingSettings",
    "TrainingStepUnit",
]

TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*-v[0-9]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskMode(StrEnum):
    BATCH = "batch"
    INTERACTIVE = "interactive"
    TASK_CONFIG = "task_config"


class Direction(StrEnum):
    HIGHER_IS_BETTER = "higher_is_better"
    LOWER_IS_BETTER = "lower_is_better"


class MetricRole(StrEnum):
    PRIMARY = "primary"
    """The metric normalized against the paper target."""
    SAFETY = "safety"
    """A zero-target metric that multiplies the score by a penalty factor."""
    CONDITION = "condition"
    """A metric that must reach a threshold for the task to score at all."""
    REPORT = "report"
    """Reported alongside the score, never scored."""


class MetricSpec(_Strict):
    name: str = Field(description="Key in EvalResult.metrics, e.g. 'mean_return'.")
    direction: Direction
    role: MetricRole = MetricRole.PRIMARY
    unit: str = ""
    description: str = ""
    can_be_negative: bool = Field(
        default=False,
        description="True when the metric can be below zero (raw returns of some tasks); "
        "such a metric cannot be the primary one of a ratio score.",
    )


class PaperRef(_Strict):
    title: str
    authors: str
    year: int
    url: str = ""
    citation: str = ""


class SimulatorSpec(_Strict):
    name: Literal["mujoco", "pybullet", "dm_control", "isaaclab"]
    package: str = Field(description="Python distribution whose version is recorded in results.")


class EnvSpec(_Strict):
    gym_id: str = Field(description="Gymnasium id, e.g. 'InvertedPendulum-v5'.")
    kwargs: dict[str, Any] = Field(default_factory=dict)
    max_episode_steps: int = Field(gt=0)
    agent_hidden_modules: list[str] = Field(
        default_factory=list,
        description="Python packages or modules the agent's sandbox must not be able to "
        "import, e.g. a simulator's bundled scripted solutions ('metaworld.policies'); see "
        "ale_robotics.harness.agent.hidden_modules.",
    )


class EvalProtocol(_Strict):
    """How the evaluator runs its own episodes (the paper's protocol).

    ``rollout`` is written ``backend`` in the config (the key the release manifests'
    config hashes were taken over, and the one every stored task dump holds); it is
    read and written under that name only.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )

    episodes: int = Field(gt=0, description="Evaluation episodes, one hidden seed each.")
    base_seeds: list[int] = Field(
        description="Public base seeds s_i; the evaluator uses SHA256(s_i || run_id || secret)."
    )
    deterministic: bool = Field(default=True, description="Policy used without exploration noise.")
    rollout: str = Field(
        default="gymnasium",
        alias="backend",
        description="The rollout kind (ale_robotics.rollouts), one of the names registered "
        "in the entry-point group 'ale_robotics.rollout_kinds'. Bundled: "
        "'gymnasium': Gymnasium envs stepped in worker processes; "
        "'mujoco_rollout': all of a shard's physics stepped by mujoco.rollout in C threads "
        "(only env families with a vectorized step, see rollouts/mujoco_rollout); "
        "'replay': no policy, the submission holds one action sequence per published "
        "instance and the evaluator replays a hidden subset open-loop (rollouts/replay); "
        "'planner': the submission configures an OMPL planner that the evaluator runs on "
        "hidden-seed scenes; 'edmp': the agent's copy of the task config sets the evaluator's "
        "own trajectory generator (both: rollouts/planning).",
    )
    replay_subset: int | None = Field(
        default=None,
        gt=0,
        description="Replay kind only: how many of the published instances (base_seeds) are "
        "replayed. Which ones depends on the run's hidden seeds, so the agent must solve all.",
    )
    threads: int = Field(
        default=1,
        gt=0,
        le=64,
        description="mujoco_rollout kind only: mujoco.rollout threads per shard.",
    )
    envs_per_shard: int = Field(
        default=16,
        gt=0,
        description="Episodes simulated together in one shard. Fixed by the task, not the host, "
        "so that results do not depend on how many processes the evaluator happens to use.",
    )
    engines_comparable: bool = Field(
        default=False,
        description="Whether results of this task from different engine builds or devices "
        "(EvalResult.engine, e.g. mujoco-warp on 'cpu' and on 'cuda:0', whose float results "
        "need not agree) rank together. False: the leaderboard ranks each engine and device "
        "apart. Tasks of kinds that run in the evaluator's own environment have one engine.",
    )

    @field_validator("rollout")
    @classmethod
    def _registered_kind(cls, name: str) -> str:
        names = kind_names()
        if name not in names:
            registered = ", ".join(repr(n) for n in names) or "none (reinstall ale-robotics)"
            raise ValueError(
                f"eval.backend {name!r} is not a registered rollout kind; registered: "
                f"{registered} (entry points of the group {ENTRY_POINT_GROUP!r})"
            )
        return name

    @model_validator(mode="after")
    def _seeds_cover_episodes(self) -> EvalProtocol:
        if len(self.base_seeds) != self.episodes:
            raise ValueError(
                f"eval.base_seeds has {len(self.base_seeds)} entries; "
                f"eval.episodes is {self.episodes}: give exactly one base seed per episode"
            )
        if len(set(self.base_seeds)) != len(self.base_seeds):
            raise ValueError("eval.base_seeds must be distinct")
        return self

    @property
    def evaluated_episodes(self) -> int:
        """Episodes one evaluation actually runs, as its kind counts them (the hidden
        subset for replay tasks)."""
        return get_kind(self.rollout).evaluated_episodes(self)


class TrainingStepUnit(StrEnum):
    """What one step of a training budget (``compute_budget.training_steps``) is.

    The budget is written in the unit the paper counts, so that its number can be
    checked against the paper's text; the evaluator converts it to agent steps,
    the only thing it can count on the wire.
    """

    AGENT_STEP = "agent_step"
    """One env of one Step call: one step of the task's env as the agent sees it. TD3
    counts env steps, and TD-MPC2's trainer counts one call of its action-repeat
    wrapper, both exactly this (the repeat happens inside the task's env)."""
    SIMULATOR_STEP = "simulator_step"
    """One step of the simulator under the env's action repeat: an agent step is
    ``action_repeat`` of them, so the budget is ``training_steps // action_repeat``
    agent steps."""


class SessionSettings(_Strict):
    """Server-side limits of interactive sessions (practice and eval)."""

    max_envs_per_session: int = Field(default=64, gt=0, le=1024)
    max_sessions: int = Field(default=8, gt=0, description="Concurrent sessions per evaluator.")
    idle_timeout_s: float = Field(default=300.0, gt=0, description="Idle sessions are reaped.")
    call_deadline_s: float = Field(default=30.0, gt=0, description="Per-call server deadline.")
    practice_allowed: bool = Field(default=True, description="Whether practice sessions open.")
    training_step_unit: TrainingStepUnit = Field(
        default=TrainingStepUnit.AGENT_STEP,
        description="The unit of the release manifest's compute_budget.training_steps for "
        "this task (the one the paper's step count uses); the evaluator enforces the budget "
        "on practice sessions in agent steps (Step calls x envs) converted from it.",
    )


class CheckpointSettings(_Strict):
    """Checkpoints of a batch task's training, evaluated by the evaluator (SubmitCheckpoint).

    A learning curve the agent writes itself proves nothing: any numbers fit in a
    CSV. Here the agent commits intermediate policies while it trains; the
    evaluator runs each on ``episodes`` hidden-seed episodes of its own and stamps
    it with its own count of the run's practice steps at that moment, so the curve
    the faithfulness gate reads is measured, not declared. The agent never sees
    the returns (no evaluation oracle).
    """

    episodes: int = Field(gt=0, description="Hidden-seed episodes per checkpoint evaluation.")
    base_seeds: list[int] = Field(
        description="Public base seeds of the checkpoint episodes, one per episode, distinct and "
        "disjoint from eval.base_seeds; the hidden seeds are SHA256(s_i || run_id || secret), "
        "as for the evaluation."
    )
    max_checkpoints: int = Field(
        default=50,
        gt=0,
        description="Checkpoints one run may submit (each costs the evaluator an evaluation).",
    )

    @model_validator(mode="after")
    def _seeds_cover_episodes(self) -> CheckpointSettings:
        if len(self.base_seeds) != self.episodes:
            raise ValueError(
                f"training.checkpoints.base_seeds has {len(self.base_seeds)} entries; "
                f"training.checkpoints.episodes is {self.episodes}: give exactly one base seed "
                "per episode"
            )
        if len(set(self.base_seeds)) != len(self.base_seeds):
            raise ValueError("training.checkpoints.base_seeds must be distinct")
        return self


class TrainingSettings(_Strict):
    """Where the agent's training simulator runs, and what the evaluator measures of it."""

    simulator: Literal["agent", "evaluator"] = Field(
        default="agent",
        description="'agent': the agent may simulate in its own sandbox, and its training "
        "steps are only declared. 'evaluator': the simulator runs only in the evaluator; the "
        "agent sandbox hides the simulator packages at the filesystem level, and the agent "
        "trains through practice sessions, counted by the evaluator against the manifest's "
        "compute_budget.training_steps (also on a batch task, which then offers practice "
        "sessions, never eval sessions).",
    )
    checkpoints: CheckpointSettings | None = Field(
        default=None,
        description="Batch tasks with a policy only: SubmitCheckpoint is offered, and the "
        "evaluator measures the learning curve on hidden seeds.",
    )


class TaskSpec(_Strict):
    """One task, as shipped. Identity is ``id`` (``name-vN``)."""

    schema_version: Literal[1] = 1
    id: str
    title: str
    description: str
    mode: TaskMode
    genre: Literal["benchmark", "reproduction", "planning"] = "benchmark"
    simulator: SimulatorSpec
    env: EnvSpec
    paper: PaperRef
    metrics: list[MetricSpec]
    policy: PolicyArchitecture | None = None
    contract: SubmissionContract | None = None
    eval: EvalProtocol
    session: SessionSettings | None = Field(
        default=None,
        description="Session limits: interactive tasks, and batch tasks whose "
        "training.simulator is 'evaluator' (practice sessions only).",
    )
    training: TrainingSettings | None = Field(
        default=None,
        description="Where training simulates and what the evaluator measures of it; None: "
        "as training.simulator 'agent' without checkpoints.",
    )
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    planning: PlanningSettings | None = Field(
        default=None, description="Planning tasks only: scenes, path validation, planner limits."
    )

    @field_validator("id")
    @classmethod
    def _id_format(cls, v: str) -> str:
        if not TASK_ID_RE.match(v):
            raise ValueError(f"task id {v!r} must look like 'name-vN' (lowercase, digits, '-')")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        primaries = [m for m in self.metrics if m.role is MetricRole.PRIMARY]
        if len(primaries) != 1:
            raise ValueError(f"task {self.id}: exactly one metric must have role 'primary'")
        if primaries[0].can_be_negative:
            raise ValueError(
                f"task {self.id}: metrics.{primaries[0].name} can be negative, so a ratio to the "
                "paper value is meaningless; declare it as a cost with the opposite direction"
            )
        if self.mode in (TaskMode.BATCH, TaskMode.TASK_CONFIG) and self.contract is None:
            raise ValueError(f"task {self.id}: a {self.mode} task needs a 'contract'")
        # What depends on the rollout kind is the kind's to check: the generic rule here
        # (no setting its kind does not read), then the kind's own shape rules.
        kind = get_kind(self.eval.rollout)
        for setting, (is_set, message) in KIND_SETTINGS.items():
            if setting not in kind.settings and is_set(self):
                raise ValueError(
                    f"task {self.id}: " + message.format(kinds=_kinds_reading(setting))
                )
        if kind.engine is not None:
            self._check_engine_kind(kind.name, kind.engine)
        kind.check_task(self)
        if self.mode is TaskMode.INTERACTIVE and self.session is None:
            raise ValueError(f"task {self.id}: an interactive task needs 'session' settings")
        self._check_training()
        return self

    def _check_training(self) -> None:
        """The rules of ``training`` and of sessions outside interactive tasks.

        Each refusal keeps a setting from being silently ignored or a promise from
        being broken: a session block a task cannot use, a simulator the agent is
        told is the evaluator's while it cannot train there, checkpoints nobody
        could submit or whose step counts would all be zero.
        """
        evaluator_side = self.training is not None and self.training.simulator == "evaluator"
        if (
            self.session is not None
            and self.mode is not TaskMode.INTERACTIVE
            and not evaluator_side
        ):
            raise ValueError(
                f"task {self.id}: a {self.mode.value} task offers no sessions, so its 'session' "
                "settings would be ignored; set training.simulator to 'evaluator' to offer "
                "practice sessions, or remove 'session'"
            )
        if evaluator_side and (self.session is None or not self.session.practice_allowed):
            raise ValueError(
                f"task {self.id}: training.simulator 'evaluator' hides the simulator from the "
                "agent, so it can only train through practice sessions: give the task a "
                "'session' section with practice_allowed true"
            )
        ckpt = self.training.checkpoints if self.training is not None else None
        if ckpt is None:
            return
        if self.mode is not TaskMode.BATCH or self.policy is None:
            raise ValueError(
                f"task {self.id}: training.checkpoints apply only to batch tasks with a "
                f"'policy' (SubmitCheckpoint evaluates policy weights), not to a "
                f"{self.mode.value} task" + ("" if self.policy is not None else " without one")
            )
        if not evaluator_side:
            raise ValueError(
                f"task {self.id}: training.checkpoints need training.simulator 'evaluator': "
                "each checkpoint is stamped with the evaluator's count of the run's practice "
                "steps, which counts nothing while the agent simulates on its own side"
            )
        shared = sorted(set(ckpt.base_seeds) & set(self.eval.base_seeds))
        if shared:
            raise ValueError(
                f"task {self.id}: training.checkpoints.base_seeds {shared} are also "
                "eval.base_seeds: checkpoint episodes must not replay the evaluation's"
            )

    def _check_engine_kind(self, kind: str, engine: str) -> None:
        """The rules of every kind whose shards run in an engine environment: its episodes
        are a batch job's (never an evaluator session's), and checkpoints, which the
        evaluator measures in its own process, cannot be taken there."""
        where = f"task {self.id}: eval.backend {kind!r}"
        if self.mode is not TaskMode.BATCH:
            raise ValueError(
                f"{where} runs batch tasks only (its shards run in the {engine} engine, not "
                "in the evaluator's sessions)"
            )
        if self.training is not None and self.training.checkpoints is not None:
            raise ValueError(
                f"{where}: training.checkpoints are measured in the evaluator's own process, "
                f"and this kind runs only in its engine environment ({engine}): leave "
                "checkpoints out"
            )

    @property
    def simulator_in_evaluator(self) -> bool:
        """Whether the simulator runs only in the evaluator (training.simulator 'evaluator'):
        hidden from the agent's sandbox, training counted through practice sessions."""
        return self.training is not None and self.training.simulator == "evaluator"

    @property
    def offers_practice_sessions(self) -> bool:
        """Whether practice sessions open on this task: an interactive task allowing them,
        or a task whose simulator is the evaluator's (a batch task too)."""
        if self.session is None or not self.session.practice_allowed:
            return False
        return self.mode is TaskMode.INTERACTIVE or self.simulator_in_evaluator

    @property
    def offers_eval_sessions(self) -> bool:
        """Whether an eval session may open: interactive tasks only (a batch task is
        evaluated on its submission, never on a live session)."""
        return self.mode is TaskMode.INTERACTIVE

    @property
    def evaluator_counts_training(self) -> bool:
        """Whether the evaluator counts and enforces the training budget: the agent's
        training steps can only happen in its practice sessions (the simulator is on the
        evaluator's side: an interactive task, or training.simulator 'evaluator')."""
        interactive = self.mode is TaskMode.INTERACTIVE and self.session is not None
        return interactive or self.simulator_in_evaluator

    @property
    def version(self) -> int:
        return int(self.id.rsplit("-v", 1)[1])

    @property
    def primary_metric(self) -> MetricSpec:
        return next(m for m in self.metrics if m.role is MetricRole.PRIMARY)


def _has_bounds(task: TaskSpec) -> bool:
    return task.contract is not None and any(
        t.low is not None or t.high is not None for t in task.contract.tensors
    )


KIND_SETTINGS: dict[str, tuple[Callable[[TaskSpec], bool], str]] = {
    "eval.replay_subset": (
        lambda t: t.eval.replay_subset is not None,
        "eval.replay_subset applies only to eval.backend {kinds}",
    ),
    "eval.threads": (
        # by value, not by presence: a task's dump writes every field, defaults included
        lambda t: t.eval.threads != EvalProtocol.model_fields["threads"].default,
        "eval.threads applies only to eval.backend {kinds}",
    ),
    "planning": (
        lambda t: t.planning is not None,
        "'planning' settings go with eval.backend {kinds}",
    ),
    "contract.tensors.bounds": (
        # the weights loader does not read bounds; refusing them keeps a rule from being ignored
        _has_bounds,
        "tensor bounds (low/high) apply only to eval.backend {kinds}",
    ),
}
"""The task settings that only some rollout kinds read: name -> (is it set in this task,
the refusal). A kind lists the ones it reads in :attr:`RolloutKind.settings
<ale_robotics.model.rollout_kind.RolloutKind.settings>`; a task that sets one its kind does not
read is refused, so that no setting in a config is silently ignored."""


def _kinds_reading(setting: str) -> str:
    """``'a' or 'b'``: the registered kinds that read ``setting`` (loads them all; only for
    the message of a refused config)."""
    readers = [repr(n) for n in kind_names() if setting in get_kind(n).settings]
    return " or ".join(readers) or "(none registered)"
