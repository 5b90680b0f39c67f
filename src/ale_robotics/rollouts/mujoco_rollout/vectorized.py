"""The fastest native path: all episodes' physics stepped together by ``mujoco.rollout``.

Gymnasium's MuJoCo envs spend most of a step in Python (wrappers, reward,
observation). Here one Python iteration advances *every* episode: the batched
MLP gives all actions, then ``mujoco.rollout`` steps all MuJoCo states in C
threads (it releases the GIL), then reward and observation are computed with
numpy over the batch. Initial states come from the real Gymnasium env's
``reset(seed=...)``, so reset noise is exactly Gymnasium's; the step semantics
are re-implemented per env family below and pinned to Gymnasium's by a test
(tests/evaluator/test_vector_backend.py).

One difference is deliberate: each control step starts the constraint solver
cold (zero warm start), where Gymnasium warm-starts it from the previous step.
Both converge to the solver's tolerance, so single steps agree to ~1e-9; over a
long episode a chaotic gait can amplify that, so per-episode returns match
Gymnasium's statistically, not bit for bit. The kind's own results are
exact: identical for any number of threads.

Every batch of actions is checked finite before it is stepped, and every
batch of rewards after (:func:`~ale_robotics.evaluator.episode.check_finite`):
a NaN action would otherwise be zeroed by MuJoCo while the return turned NaN,
voiding the whole evaluation late, as a non-finite metric, instead of naming
the episode.

Only env families listed in :data:`FAMILIES` can use this kind (the kind's
``check_task`` refuses any other env); the task config chooses it with
``eval.backend = "mujoco_rollout"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.episode import check_finite
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["FAMILIES", "Family", "Policy", "family_of", "rollout_on", "rollout_vectorized"]

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Family:
    """How one Gymnasium MuJoCo env computes observation, reward and termination."""

    obs: Callable[[Any, Array, Array], Array]
    """(env, qpos batch, qvel batch) -> observation batch."""
    reward: Callable[[Any, Array, Array, npt.NDArray[np.float32]], Array]
    """(env, qpos before, qpos after, action batch) -> reward batch."""


def _cheetah_obs(env: Any, qpos: Array, qvel: Array) -> Array:
    start = 1 if env._exclude_current_positions_from_observation else 0
    return np.concatenate([qpos[:, start:], qvel], axis=1)


def _cheetah_reward(
    env: Any, before: Array, after: Array, action: npt.NDArray[np.float32]
) -> Array:
    x_velocity = (after[:, 0] - before[:, 0]) / env.dt
    ctrl_cost = env._ctrl_cost_weight * np.sum(np.square(action), axis=1)
    out: Array = env._forward_reward_weight * x_velocity - ctrl_cost
    return out


FAMILIES: dict[str, Family] = {
    "HalfCheetah-v5": Family(obs=_cheetah_obs, reward=_cheetah_reward),
}

Policy = Callable[[npt.NDArray[np.floating]], npt.NDArray[np.float32]]
"""Observation batch -> action batch (the batched MLP, or any callable in tests)."""


def family_of(task: TaskSpec) -> Family:
    """The task env's family; ``ValueError`` when it has no vectorized step here."""
    family = FAMILIES.get(task.env.gym_id)
    if family is None:
        raise ValueError(
            f"no vectorized backend for {task.env.gym_id} (the mujoco_rollout kind steps "
            f"{sorted(FAMILIES)}); use backend 'gymnasium'"
        )
    return family


def rollout_vectorized(
    task: TaskSpec,
    policy: Policy,
    seeds: Sequence[tuple[int, int]],
    nthread: int = 1,
) -> list[tuple[int, float, int]]:
    """Run one episode per ``(index, seed)``; returns ``(index, return, length)`` each.

    The env families here never terminate early, so every episode runs
    ``task.env.max_episode_steps`` steps (Gymnasium's TimeLimit truncation).
    Raises :class:`~ale_robotics.evaluator.episode.PolicyFault` at the first
    non-finite action or reward.
    """
    family = family_of(task)
    env: Any = make_env(task.env, time_limit=False).unwrapped
    try:
        return rollout_on(env, family, task, policy, seeds, nthread)
    finally:
        env.close()


def rollout_on(
    env: Any,
    family: Family,
    task: TaskSpec,
    policy: Policy,
    seeds: Sequence[tuple[int, int]],
    nthread: int = 1,
) -> list[tuple[int, float, int]]:
    """:func:`rollout_vectorized` on a given unwrapped env of the task (its model, its
    ``reset``), for a caller that needs the env first (the action bound of the policy)."""
    # The simulator is imported where a shard is stepped, not when the kind is loaded (every
    # task-config parse loads its kind, e.g. in an agent's client reading GetSpec).
    import mujoco
    from mujoco import rollout

    model, frame_skip = env.model, env.frame_skip
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    n = len(seeds)
    state = np.zeros((n, mujoco.mj_stateSize(model, spec)))
    for row, (_, seed) in enumerate(seeds):
        env.reset(seed=int(seed))
        mujoco.mj_getState(model, env.data, state[row], spec)
    qpos_slice = slice(1, 1 + model.nq)  # FULLPHYSICS starts with time
    qvel_slice = slice(1 + model.nq, 1 + model.nq + model.nv)
    datas = [mujoco.MjData(model) for _ in range(max(1, nthread))]
    runner = rollout.Rollout(nthread=max(1, nthread))
    returns = np.zeros(n)
    # The solver's warm start is not part of the FULLPHYSICS state. Left implicit,
    # rollout would reuse whatever the thread's MjData last held (another episode's),
    # making results depend on thread scheduling; explicit zeros make them exact.
    warmstart = np.zeros((n, model.nv))
    episodes = [index for index, _ in seeds]
    try:
        for step in range(1, task.env.max_episode_steps + 1):
            qpos = state[:, qpos_slice]
            obs = family.obs(env, qpos, state[:, qvel_slice])
            action = np.asarray(policy(obs), dtype=np.float32)
            check_finite("action", action, episodes, step)
            control = np.repeat(action.astype(np.float64)[:, None, :], frame_skip, axis=1)
            out, _ = runner.rollout(
                model, datas, state, control, nstep=frame_skip, initial_warmstart=warmstart
            )
            state = np.ascontiguousarray(out[:, -1, :])
            reward = family.reward(env, qpos, state[:, qpos_slice], action)
            check_finite("reward", reward, episodes, step)
            returns += reward
    finally:
        runner.close()
    return [
        (index, float(returns[row]), task.env.max_episode_steps)
        for row, (index, _) in enumerate(seeds)
    ]
