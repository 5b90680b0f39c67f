"""The ``ros`` kind: each hidden-seed episode a ROS 1 launch graph, the policy its controller.

A deployment-style evaluation of the contract's policy: for each episode the worker starts
a launch graph of its own (:mod:`.graph`: roscore on a private loopback, a MuJoCo simulator
node that keeps the env's control rate in wall-clock time, a policy node with the
submitted weights, a recorder), reads the episode from the recorder and tears the graph
down. The physics, observations, rewards and reset noise are the task's Gymnasium env's,
so when the controller keeps up every step is ``env.step(policy(obs))`` and the episode is
the ``gymnasium`` kind's to the bit; when it does not, the steps it missed hold the last
command it sent (:mod:`.schedule`), and the result says how often (``held_command_rate``)
and how fast the graph answered (latencies, its start), measured on the evaluator's host.

Same contract, hidden seeds and non-finite checks as every policy kind: a submission is
weights (validated by :meth:`load_artifact` in the evaluator, written as safetensors for the
policy node), never code. A policy node that crashes or hangs fails its episode as the
robot would (it holds the last command to the end); only a graph that ends without a
record is the platform's failure (retried, never scored).

Runs in the engine environment ``ros`` (:mod:`.engine`); one worker per host
(:attr:`RosKind.worker_needs`): graphs keep real time, and two at once would take each
other's CPU. Its re-runs (an audit) impose the signed hold schedule
(:meth:`RosKind.rerun_artifact`), so they reproduce the episodes on any host and re-measure
only the timing. No videos: a video would replay the policy without the graph's timing,
which is not the episode that was measured.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard, WorkerNeeds
from ale_robotics.rollouts.policy import PolicyRolloutKind
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.model.outcomes import BatchOutcomes
    from ale_robotics.rollouts.ros.graph import GraphEpisode, GraphSetup

__all__ = ["ENGINE", "SCHEDULE_KEY", "TEMPLATE_TASK", "RosKind", "graph_setup"]

ENGINE = "ros"
"""The engine environment this kind runs in (:class:`.engine.RosEngine`)."""

TEMPLATE_TASK = "td3-hopper-ros-v1"
"""A bundled task of this kind: the engine's warm-up runs an episode of it."""

SCHEDULE_KEY = "__ros.holds/"
"""Artifact keys ``SCHEDULE_KEY + str(index)``: the hold schedule a re-run imposes on
episode ``index`` (int64, ``(runs, 3)``). No submission has them: the contract's exact
key set is checked when one is loaded."""


def graph_setup() -> GraphSetup:
    """How the graph's nodes start: the engine's interpreter, with this ``ale_robotics`` first
    on its path. In the engine (its worker, its warm-up) that is this process's own
    interpreter and path; elsewhere (the evaluator's process: tests) the installed engine's
    and its overlay."""
    import importlib.util
    import sys
    from pathlib import Path

    import ale_robotics
    from ale_robotics.rollouts.ros.graph import GraphSetup

    if importlib.util.find_spec("rospy") is not None:
        return GraphSetup(sys.executable, (str(Path(ale_robotics.__file__).parent.parent),))
    from ale_robotics.engines import get_engine, worker_launch

    launch = worker_launch(get_engine(ENGINE))
    return GraphSetup(python=launch.python, path=(launch.sys_path[0],))


@functools.cache
def _env_facts(env_json: str) -> tuple[float, tuple[float, ...]]:
    """The env's control period and action bound (its ``dt`` and ``action_space.high``)."""
    from ale_robotics.envs.make import make_env
    from ale_robotics.tasks.spec import EnvSpec

    env = make_env(EnvSpec.model_validate_json(env_json))
    try:
        return float(env.unwrapped.dt), tuple(float(x) for x in env.action_space.high.ravel())
    finally:
        env.close()


def run_graph_episode(
    task: TaskSpec,
    weights: Artifact,
    index: int,
    seed: int,
    setup: GraphSetup,
    replay: Sequence[Sequence[int]] | None = None,
) -> GraphEpisode:
    """One episode of ``task`` as a graph (:func:`.graph.run_episode`), live or replaying
    the hold schedule ``replay``."""
    from ale_robotics.rollouts.ros.graph import START_TIMEOUT_S, run_episode
    from ale_robotics.rollouts.ros.nodes.wire import EpisodeParams

    period, high = _env_facts(task.env.model_dump_json())
    params = EpisodeParams(
        index=index,
        seed=seed,
        period_s=period,
        action_high=list(high),
        start_timeout_s=START_TIMEOUT_S,
        replay=None if replay is None else [(int(a), int(b), int(c)) for a, b, c in replay],
    )
    return run_episode(task, dict(weights), params, setup)


def _outcome(episode: GraphEpisode) -> EpisodeOutcome:
    """The episode's outcome from its record; :class:`PolicyFault` for a non-finite value."""
    import numpy as np

    from ale_robotics.model.control_loop import ControlLoop
    from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
    from ale_robotics.rollouts.ros.schedule import hold_runs

    record = episode.record
    if record.fault is not None:
        f = record.fault
        raise PolicyFault(f.what, f.value, record.index, f.step)
    timing = record.timing
    latency = np.asarray(timing.latency_us, dtype=np.float64)

    def pct(q: float) -> float | None:
        return float(np.percentile(latency, q)) if latency.size else None

    control = ControlLoop(
        holds=tuple(hold_runs(record.applied)),
        late=timing.late,
        missing=record.length - timing.received,
        latency_p50_us=pct(50),
        latency_p99_us=pct(99),
        latency_max_us=float(latency.max()) if latency.size else None,
        max_tick_lag_us=timing.max_tick_lag_us,
        graph_start_s=episode.start_s,
    )
    return EpisodeOutcome(
        record.index, record.episode_return, record.length, record.terminated, control=control
    )


class RosKind(PolicyRolloutKind):
    """The contract's policy as a ROS 1 controller at the env's control rate."""

    name = "ros"
    engine = ENGINE
    worker_needs: ClassVar[WorkerNeeds] = WorkerNeeds(max_workers=1)
    step_name = "graph"
    video_source = None

    def check_task(self, task: TaskSpec) -> None:
        super().check_task(task)
        if task.simulator.name != "mujoco":
            raise ValueError(
                f"task {task.id}: eval.backend {self.name!r} simulates MuJoCo envs (its engine "
                f"holds MuJoCo and Gymnasium), not {task.simulator.name!r}"
            )

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """One graph per ``(index, seed)``, one after the other (graphs keep real time)."""
        weights = {k: v for k, v in artifact.items() if not k.startswith(SCHEDULE_KEY)}
        setup = graph_setup()
        outcomes = []
        for index, seed in seeds:
            schedule = artifact.get(f"{SCHEDULE_KEY}{index}")
            replay = None if schedule is None else schedule.reshape(-1, 3).tolist()
            outcome = _outcome(run_graph_episode(task, weights, index, seed, setup, replay))
            outcomes.append(outcome)
            if on_episode is not None:
                on_episode(outcome)
        return outcomes

    def outcome_record(
        self, base_seeds: Sequence[int], outcomes: Sequence[EpisodeOutcome]
    ) -> BatchOutcomes:
        from ale_robotics.model.outcomes import ControlLoopOutcomes

        return ControlLoopOutcomes.from_episodes(self.name, outcomes)

    def rerun_artifact(self, artifact: Artifact, signed: BatchOutcomes) -> Artifact:
        """The artifact with each signed episode's hold schedule (:data:`SCHEDULE_KEY`), so
        that the re-run's graphs apply the commands the signed episodes applied."""
        import numpy as np

        from ale_robotics.model.outcomes import ControlLoopOutcomes

        if not isinstance(signed, ControlLoopOutcomes):
            return artifact
        out = dict(artifact)
        for e in signed.episodes:
            if e.holds is not None:
                out[f"{SCHEDULE_KEY}{e.index}"] = np.array(e.holds, dtype=np.int64).reshape(-1, 3)
        return out
