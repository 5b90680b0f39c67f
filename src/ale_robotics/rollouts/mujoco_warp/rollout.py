"""A shard's episodes on MuJoCo Warp: the loop of the ``mujoco_warp`` kind.

The same episode as the ``mujoco_rollout`` kind's, step for step: initial states drawn
exactly as Gymnasium's ``reset(seed=...)`` draws them (:meth:`Family.reset_state`, the
env's own noise), the batched MLP on the running episodes' observations in seed order
(episodes that end leave the policy's batch, as there), observation, reward and
termination from the env's family with numpy, each batch of actions and rewards checked
finite. Only the physics is Warp's (:class:`.physics.WarpWorlds`).

Runs in the engine's worker process (its numpy, MuJoCo, Gymnasium and Warp).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.model.episode import EpisodeOutcome, check_finite
from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, FamilyEnv, StepView
from ale_robotics.rollouts.mujoco_warp.physics import WarpWorlds, pick_device
from ale_robotics.rollouts.policy import policy_for
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["rollout_worlds", "run_shard"]

_ENVS: dict[str, Any] = {}
"""Unwrapped Gymnasium envs by env section, kept for the worker's life (their model is
what Warp's model is made from, once)."""
_WORLDS: dict[tuple[str, int, str], WarpWorlds] = {}
"""Warp data by (env section, worlds, device), reused across a worker's shards."""


def _env(task: TaskSpec) -> Any:
    from ale_robotics.envs.make import make_env

    key = task.env.model_dump_json()
    env = _ENVS.get(key)
    if env is None:
        env = _ENVS[key] = make_env(task.env, time_limit=False).unwrapped
    return env


def run_shard(
    task: TaskSpec,
    artifact: Artifact,
    seeds: Sequence[tuple[int, int]],
    on_episode: EpisodeCallback | None = None,
) -> list[EpisodeOutcome]:
    """One episode per ``(index, seed)`` with the submitted policy; outcomes in seed order."""
    env = _env(task)
    policy = policy_for(task, artifact, env.action_space.high)
    return rollout_worlds(env, task, policy, seeds, on_episode)


def _worlds(task: TaskSpec, env: Any, n: int) -> WarpWorlds:
    device = pick_device()
    key = (task.env.model_dump_json(), n, device)
    worlds = _WORLDS.get(key)
    if worlds is None:
        worlds = _WORLDS[key] = WarpWorlds(env, n, device)
    return worlds


def _view(worlds: WarpWorlds, family: Family, env: Any, rows: npt.NDArray[np.int64]) -> StepView:
    """The rows ``rows`` of the worlds, the fields ``family`` reads."""
    import mujoco

    xpos = worlds.read("xpos") if family.bodies else None
    ids = {b: mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, b) for b in family.bodies}
    return StepView(
        qpos=worlds.read("qpos")[rows],
        qvel=worlds.read("qvel")[rows],
        xpos={} if xpos is None else {b: xpos[rows, i] for b, i in ids.items()},
        site_xpos=worlds.read("site_xpos")[rows] if "site_xpos" in family.fields else None,
        qfrc_constraint=worlds.read("qfrc_constraint")[rows]
        if "qfrc_constraint" in family.fields
        else None,
    )


def rollout_worlds(
    env: Any,
    task: TaskSpec,
    policy: Any,
    seeds: Sequence[tuple[int, int]],
    on_episode: EpisodeCallback | None = None,
) -> list[EpisodeOutcome]:
    """The loop (see the module docstring); ``policy`` maps an observation batch to actions.
    Raises :class:`~ale_robotics.model.episode.PolicyFault` at the first non-finite action
    or reward."""
    from gymnasium.utils.seeding import np_random

    family = FAMILIES[task.env.gym_id]
    n = len(seeds)
    if n == 0:
        return []
    starts = []
    for _, seed in seeds:
        state = family.reset_state(env, np_random(int(seed))[0])
        if state is None:  # every family here draws its own; kept for a new one that does not
            env.reset(seed=int(seed))
            state = (env.data.qpos.copy(), env.data.qvel.copy())
        starts.append(state)
    worlds = _worlds(task, env, n)
    worlds.reset(np.array([q for q, _ in starts]), np.array([v for _, v in starts]))
    episodes = np.array([index for index, _ in seeds], dtype=np.int64)
    returns = np.zeros(n)
    outcomes: list[EpisodeOutcome | None] = [None] * n
    active = np.arange(n)  # the worlds still running, in seed order
    ids = episodes.tolist()
    consts = FamilyEnv(env)
    view = _view(worlds, family, env, active)
    obs = family.observe(consts, view)
    limit = task.env.max_episode_steps
    for step in range(1, limit + 1):
        action = np.asarray(policy(obs), dtype=np.float32)
        check_finite("action", action, ids, step)
        worlds.step(active, action)
        after = _view(worlds, family, env, active)
        out = family.step(consts, view, after, action)
        check_finite("reward", out.reward, ids, step)
        returns[active] += out.reward
        done = out.terminated | (step == limit)
        if done.any():
            for j in np.flatnonzero(done):
                row = int(active[j])
                outcome = EpisodeOutcome(
                    int(episodes[row]), float(returns[row]), step, bool(out.terminated[j])
                )
                outcomes[row] = outcome
                if on_episode is not None:
                    on_episode(outcome)
            keep = ~done
            if not keep.any():
                break
            active = active[keep]
            ids = episodes[active].tolist()
            view = _view(worlds, family, env, active)
            obs = out.obs[keep]
        else:
            view, obs = after, out.obs
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]
