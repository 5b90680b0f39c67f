"""The one interface every rollout kind implements: :class:`RolloutKind`.

A *rollout kind* is how a batch task's episodes are produced from a submission:
stepping Gymnasium envs with the contract's policy (``gymnasium``), stepping the
physics of a whole shard in C threads (``mujoco_rollout``), replaying submitted
action sequences open-loop (``replay``), running a submitted planner
configuration on hidden-seed scenes (``planner``, ``edmp``)... A task picks its
kind by name in its config (``eval.backend``, the on-disk key; ``eval.rollout``
in Python) and the evaluator reaches the kind only through this interface, found
by :func:`ale_robotics.model.kind_registry.get_kind`. Everything that used to be an
``if backend == ...`` somewhere in the evaluator is a method here, so that a new
kind is one folder plus one entry point, and no other file changes.

This module imports nothing of ours at run time (only under ``TYPE_CHECKING``):
the task model (``tasks/spec.py``) validates a config through the registry, and
the kinds themselves import the task model, so the interface must sit below
both. Defaults that need more (loading policy weights) are in
:class:`ale_robotics.rollouts.policy.PolicyRolloutKind`, the base class of the policy
kinds. Nor does it import numpy at run time: the task model is what an agent's SDK
(``ale_robotics.client``) loads to read GetSpec, and an agent that only submits files
should not pay numpy's import (and teardown) for it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    # Only for the annotations (and the Artifact alias, a string at run time): numpy is
    # no import of the task model's, which every agent's SDK loads (ale_robotics.client).
    import numpy.typing as npt

    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.model.outcomes import BatchOutcomes
    from ale_robotics.model.snapshot import SnapshotFile
    from ale_robotics.seeds import HiddenSeed
    from ale_robotics.tasks.spec import EvalProtocol, TaskSpec

__all__ = ["Artifact", "EpisodeCallback", "RolloutKind", "Shard", "VideoActor", "WorkerNeeds"]

Artifact = dict[str, "npt.NDArray[Any]"]
"""What a kind loads from a frozen submission and hands to its shard runner: named arrays,
because that is what travels to worker processes (pickled, or as Ray objects) unchanged
for every kind (policy weights, a trajectory set, a planner configuration as JSON bytes)."""

Shard = Sequence[tuple[int, int]]
"""One shard's episodes: ``(index in the task's base seeds, env seed)`` each."""

EpisodeCallback = Callable[["EpisodeOutcome"], None]
"""Called once per finished episode, in the worker (progress reporting)."""

VideoActor = Callable[[Any, int], Any]
"""``(observation, step) -> action`` of one episode played again for its video; None for an
action ends the episode there (an action sequence that ran out)."""


@dataclass(frozen=True)
class WorkerNeeds:
    """What a kind needs from the worker process that runs its shards, beyond the defaults.

    Read by the executor when it picks (or starts) workers for a task of this kind; a
    kind whose ``worker_needs`` is None needs nothing beyond
    :class:`~ale_robotics.evaluator.execution.base.WorkerLimits`.
    """

    unlimited_address_space: bool = False
    """Run without ``RLIMIT_AS``: for runtimes that reserve far more virtual memory than
    they touch (XLA, CUDA), where an address-space cap measures nothing useful and only
    breaks start-up. Resident memory is then bounded by the host (or a cgroup)."""
    max_workers: int | None = None
    """The most worker processes that should run this kind's shards at once on one host
    (None: as many as the executor has)."""


class RolloutKind(abc.ABC):
    """One way of turning a submission into per-episode outcomes, and all it needs to know.

    Instances are stateless and shared (the registry keeps one per name and
    process), so a kind keeps per-process caches (envs, simulator worlds) in its
    module, not on ``self``. Subclasses set :attr:`name` (equal to the entry-point
    name that registers them) and implement :meth:`load_artifact`,
    :meth:`run_shard` and :meth:`outcome_record`; the other methods default to
    "one episode per hidden seed, the first N for a smoke run".
    """

    name: ClassVar[str]
    """The kind's name: the value of ``eval.backend`` in a task config, and its entry point."""

    settings: ClassVar[frozenset[str]] = frozenset()
    """The kind-specific task settings this kind reads, named as in
    :data:`ale_robotics.tasks.spec.KIND_SETTINGS` (e.g. ``"eval.replay_subset"``). The task
    model refuses a task that sets one its kind does not read, so that no setting in a
    config is silently ignored."""

    worker_needs: ClassVar[WorkerNeeds | None] = None
    """What the kind needs from the worker processes that run its shards beyond the
    executor's ``WorkerLimits`` (JAX/XLA: no address-space cap); None: nothing."""

    engine: ClassVar[str | None] = None
    """The engine environment whose Python runs this kind's shards, by its name in
    :mod:`ale_robotics.engines` (e.g. ``"mujoco-warp"``: packages that cannot share the
    evaluator's environment); None: the evaluator's own environment. The executor starts
    the kind's workers there and refuses a task whose engine is not installed, naming the
    command that installs it. Only :meth:`run_shard` (and what it imports) runs there:
    :meth:`load_artifact`, :meth:`check_task` and the rest run in the evaluator."""

    # ------------------------------------------------------------ task config --

    def check_task(self, task: TaskSpec) -> None:
        """Raise ``ValueError`` unless ``task`` is shaped the way this kind reads it.

        Called by :class:`~ale_robotics.tasks.spec.TaskSpec`'s validator after the
        generic checks, so a config that parses is one the kind can run.
        """
        return None  # a kind without rules of its own (B027: a default, not an abstract)

    def evaluated_episodes(self, protocol: EvalProtocol) -> int:
        """Episodes one evaluation runs: by default one per base seed."""
        return protocol.episodes

    def generic_metrics(self, task: TaskSpec) -> bool:
        """Whether results of ``task`` carry the generic metrics (mean and std of the return,
        mean episode length, and success rate or final distance when measured) besides the
        task's declared ones. By default True, as every result has since v0.1; a kind whose
        episodes have no meaningful return (a planning problem) says False, for the task
        versions that do not have recorded results to keep reproducing."""
        return True

    def smoke_task(self, task: TaskSpec, episodes: int) -> TaskSpec:
        """``task`` cut to its first ``episodes`` episodes (all of them if fewer), for a smoke
        run: the same base seeds, so its hidden seeds are a prefix of the official run's.
        ``episodes >= 1`` is checked by the caller."""
        ev = task.eval
        n = min(episodes, ev.episodes)
        limited = ev.model_copy(update={"episodes": n, "base_seeds": ev.base_seeds[:n]})
        return task.model_copy(update={"eval": limited})

    # --------------------------------------------------------------- a job --

    @abc.abstractmethod
    def load_artifact(self, files: list[SnapshotFile], task: TaskSpec) -> Artifact:
        """The submission's artifact from its frozen files, fully validated; raises
        ``SubmissionRejected`` naming the file and the rule. Runs in the evaluator (and in
        ``ale-robotics audit`` and ``check``), never in a worker."""

    def episode_plan(self, task: TaskSpec, seeds: Sequence[HiddenSeed]) -> list[tuple[int, int]]:
        """``(index, env seed)`` per episode this job runs, from the run's hidden seeds:
        by default every hidden seed as the env seed of its episode."""
        return [(s.index, s.value) for s in seeds]

    @abc.abstractmethod
    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """Run one shard's episodes in this process; one outcome per ``(index, seed)``.

        Raises :class:`~ale_robotics.model.episode.PolicyFault` when the
        submission makes a value non-finite (the submission's failure); any other
        exception is an infrastructure failure, retried by the runner.
        """

    @abc.abstractmethod
    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        """The typed per-episode record of a job's outcomes (stored in the result and the
        signed ``result`` event), with enough to recompute every metric; ``base_seeds``
        are the task's public base seeds (a replay task's instances)."""

    def rerun_artifact(self, artifact: Artifact, signed: BatchOutcomes) -> Artifact:
        """What a re-run of a signed job runs (``ale-robotics audit``), given the job's
        signed outcomes: by default the artifact itself. A kind whose episodes depend on
        the host's timing as well as on the submission (``ros``: which control steps held
        an older command) adds what the outcomes recorded of it, so that the re-run gets
        the recorded episodes on any host and re-measures only the timing."""
        return artifact

    floor_policy: ClassVar[str] = "null_action"
    """What :meth:`null_artifact` plays, as :attr:`~ale_robotics.model.result.Floor.policy`
    names it: 'null_action' or 'zero_output'."""

    def null_artifact(self, task: TaskSpec) -> Artifact | None:
        """A submission of ``task`` that does nothing, as this kind's artifact, or None.

        The evaluator measures it on the run's own hidden seeds, exactly as it measures the
        submission, and reports it beside the score as the task's floor
        (:class:`~ale_robotics.model.result.Floor`): how much of a score is free. By
        default None: the kind has no null submission (a planner configuration always
        plans), and its results carry no floor.
        """
        return None

    video_source: ClassVar[str | None] = None
    """How :meth:`video_actor` plays an episode again, as the videos' index names it
    (:data:`~ale_robotics.model.video.VideoSource`: 'policy' or 'replay'); None: the kind
    makes no videos (a planner's configuration has no episode to film)."""

    def video_actor(
        self, task: TaskSpec, artifact: Artifact, index: int, action_space: Any
    ) -> VideoActor | None:
        """How to play episode ``index`` of a job of ``task`` again, one env at a time, for its
        video (:mod:`ale_robotics.evaluator.videos`, after the official result): the action
        for each observation, given the env's ``action_space``. None (the default): the kind
        makes no videos."""
        return None

    def vector_stepper(self, task: TaskSpec, envs: Sequence[Any]) -> Any | None:
        """A native stepper for an interactive session's ``envs`` of ``task`` (the
        ``VectorStepper`` protocol of :mod:`ale_robotics.evaluator.sessions.envs`: every
        env's step and reset at once, exactly as its own ``env.step`` and ``env.reset``),
        or None: by default none, and the session steps and resets each env itself."""
        return None

    def __repr__(self) -> str:
        return f"<rollout kind {self.name!r} ({type(self).__module__}.{type(self).__qualname__})>"
