"""The hold schedule: which command each control step applied, and the episode it implies.

A live episode applies, at every tick, the newest command received by then: the one
answering the step's own observation when the policy was on time, an older one (held, as
an actuator holds its last setpoint) when it was late or never came, or the null command
before any arrived. That schedule is all the graph's timing changes in the physics, so
the episode is a function of (seed, weights, schedule): :func:`replay_episode` computes it
without a graph, and an audit re-runs the graph with the schedule imposed
(:class:`~.nodes.wire.EpisodeParams` ``replay``), so that both give the recorded return
to the bit on any host.

Stored as runs ``(first step, steps, command sequence)`` of the steps that did not apply
their own command: empty when every command was on time, one run when the policy died.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.model.rollout_kind import Artifact
    from ale_robotics.tasks.spec import TaskSpec

__all__ = ["NULL_COMMAND", "applied_commands", "hold_runs", "replay_episode"]

Run = tuple[int, int, int]

NULL_COMMAND = -1
"""The sequence of "no command received yet": the null action (zeros)."""


def hold_runs(applied: Sequence[int]) -> list[Run]:
    """The runs of ``applied[k] != k`` (see the module docstring)."""
    runs: list[list[int]] = []
    for step, seq in enumerate(applied):
        if seq == step:
            continue
        if seq > step or seq < NULL_COMMAND:
            raise ValueError(f"step {step} applied command {seq}: not one received before it")
        last = runs[-1] if runs else None
        if last is not None and last[0] + last[1] == step and last[2] == seq:
            last[1] += 1
        else:
            runs.append([step, 1, seq])
    return [(a, b, c) for a, b, c in runs]


def applied_commands(runs: Sequence[Sequence[int]], length: int) -> list[int]:
    """The command sequence of each of ``length`` steps under ``runs``."""
    applied = list(range(length))
    for first, count, seq in runs:
        if count < 1 or first < 0 or not NULL_COMMAND <= seq < first:
            raise ValueError(f"hold run {[first, count, seq]} is not a hold of an earlier command")
        for step in range(first, min(first + count, length)):
            applied[step] = seq
    return applied


def held_steps(runs: Sequence[Sequence[int]]) -> int:
    """Steps that applied a command other than their own."""
    return sum(int(count) for _, count, _ in runs)


def replay_episode(
    task: TaskSpec, artifact: Artifact, index: int, seed: int, runs: Sequence[Sequence[int]]
) -> EpisodeOutcome:
    """The episode the graph plays for (``seed``, weights, schedule ``runs``), computed in
    this process with the task's Gymnasium env and policy, as the ``gymnasium`` kind does
    with one env: the reference a graph's record must equal (tests, docs' measurements)."""
    import numpy as np

    from ale_robotics.envs.make import make_env
    from ale_robotics.model.episode import EpisodeOutcome
    from ale_robotics.rollouts.policy import policy_for

    env = make_env(task.env)
    try:
        policy = policy_for(task, artifact, env.action_space.high)
        dtype = env.action_space.dtype
        null = np.zeros(env.action_space.shape, dtype=dtype)
        holds = {}
        for first, count, seq in runs:
            for step in range(first, first + count):
                holds[step] = seq
        obs, _ = env.reset(seed=int(seed))
        commands: list[Any] = []
        ret, step = 0.0, 0
        while True:
            commands.append(policy(obs[None])[0].astype(dtype, copy=False))
            seq = holds.get(step, step)
            action = null if seq == NULL_COMMAND else commands[seq]
            obs, reward, terminated, truncated, _ = env.step(action)
            ret += float(reward)
            step += 1
            if terminated or truncated:
                return EpisodeOutcome(index, ret, step, bool(terminated))
    finally:
        env.close()
