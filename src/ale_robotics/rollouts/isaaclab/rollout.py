"""A shard's episodes in Isaac Lab's own env, kit-less: the loop of the ``isaaclab`` kind.

Runs only in a worker of the ``isaaclab`` engine (Python 3.12, Isaac Lab 3.0.0 on Newton +
MuJoCo Warp, torch), never in the evaluator.

**The env** is Isaac Lab's registered task (``Isaac-Cartpole-Direct``), made as its own
``train.py`` makes it (``parse_env_cfg`` then ``gym.make``) with ``num_envs`` equal to the
task's ``eval.envs_per_shard``, on the engine's device (``ALE_ENGINE_DEVICE``: ``cpu`` or
``cuda:0``), once per worker process (Isaac Lab keeps one simulation per process). A
shorter shard leaves the envs it has no episode for running unread.

**Seeding** is Isaac Lab's: before env ``row`` is reset for episode ``(index, seed)``, the
env's own ``seed`` (``isaaclab.utils.seed.configure_seed``: Python's, numpy's, torch's and
Warp's generators) is called with :func:`isaac_seed` of the hidden seed, then the env's own
``_reset_idx([row])`` draws that env's initial state (the cart's and the pole's offsets),
then the scene is written and the simulation forwarded as ``DirectRLEnv.reset`` does. So
each episode's start is a function of its hidden seed alone; its float32 physics rounds a
little differently in each env of Isaac Lab's grid (envs sit at different origins: returns
agree to about 1e-5 across rows), so an episode's exact numbers are those of its seed in its
row, which the task's shard layout fixes (``tests/rollouts/isaaclab`` checks both), and
``audit``, which re-derives the hidden seeds from their signed commitments, replays them to
the bit. The env is reset once when made, as Isaac Lab's RL wrappers do (before that a new
env's first observation lacks the drawn velocities).

**An episode** is env ``row`` from that reset to its first ``terminated`` or ``truncated``
(Isaac Lab's ``_get_dones``: the cart out of bounds, or the episode length), its return the
sum of the env's rewards until then; later steps of that env (Isaac Lab resets it by
itself) are not read. The policy is RSL-RL's actor, deterministic: the mean of its
Gaussian, the MLP applied to the ``policy`` observations, as ``rsl_rl``'s inference policy
(``runner.get_inference_policy``) acts, and the action goes to ``env.step`` unclipped, as
Isaac Lab's RSL-RL wrapper passes it with the task's ``clip_actions`` (None for the
cartpole). A non-finite action or reward is the submission's fault (:class:`PolicyFault`).

**Offline**: Isaac Lab fetches its USD assets from NVIDIA's asset server at run time;
:func:`offline` points ``ISAACSIM_ASSET_ROOT`` at the assets shipped in this package and
refuses (and records) every outgoing connection and name lookup of the process, and a
shard that saw one fails (an infrastructure failure naming it), so a run never depends on,
or talks to, the network.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ale_robotics.engines.launch import DEVICE_VAR
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback
from ale_robotics.rollouts.isaaclab.offline import NetworkTried, network_attempts, offline
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["actor", "isaac_seed", "make_env", "rollout_envs", "run_shard"]

_ENV: dict[str, Any] = {}
"""The worker's one Isaac Lab env and the key it was made for ({"key": ..., "env": ...})."""


def isaac_seed(hidden_seed: int) -> int:
    """The seed Isaac Lab's ``configure_seed`` gets for a hidden seed: its low 31 bits
    (numpy's legacy generator takes seeds below 2**32; Python's, torch's and Warp's any)."""
    return int(hidden_seed) % 2**31


def make_env(isaac_task: str, num_envs: int, device: str) -> Any:
    """Isaac Lab's env of ``isaac_task`` (unwrapped), made once per worker for these settings.

    Made as Isaac Lab's ``train.py`` makes it, offline (:func:`offline`). A process holds
    one Isaac Lab simulation, so an env of other settings closes the one before.
    """
    key = f"{isaac_task}/{num_envs}/{device}"
    if _ENV.get("key") == key:
        return _ENV["env"]
    offline()
    if "env" in _ENV:
        _ENV.pop("env").close()
        _ENV.clear()
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  # registers Isaac Lab's tasks with Gymnasium
    from isaaclab_tasks.utils import parse_env_cfg

    cfg = parse_env_cfg(isaac_task, device=device, num_envs=num_envs)
    cfg.seed = 0  # set before every episode's reset (see the module docstring)
    env = gym.make(isaac_task, cfg=cfg).unwrapped
    # Reset once, as Isaac Lab's RL wrappers do on creation: before its first reset a new
    # env's velocity buffers do not yet show a reset's velocities (measured: a first
    # episode's observation had zero velocities where later ones had the drawn ones).
    env.reset(seed=0)
    _ENV.update(key=key, env=env)
    return env


def actor(artifact: Artifact, device: str) -> Any:
    """RSL-RL's MLP actor with the submitted weights (``mlp.0``, ``mlp.2``... Linear layers
    with ELU between them), as a deterministic torch module: the mean of its Gaussian."""
    import torch

    linear = sorted(
        (int(k.split(".")[1]), k.rsplit(".", 1)[0])
        for k in artifact
        if k.startswith("mlp.") and k.endswith(".weight")
    )
    layers: list[torch.nn.Module] = []
    for i, (_, prefix) in enumerate(linear):
        w = torch.from_numpy(artifact[f"{prefix}.weight"]).to(device)
        b = torch.from_numpy(artifact[f"{prefix}.bias"]).to(device)
        layer = torch.nn.Linear(w.shape[1], w.shape[0], device=device)
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        layers.append(layer)
        if i < len(linear) - 1:
            layers.append(torch.nn.ELU())
    return torch.nn.Sequential(*layers).eval()


def run_shard(
    task: TaskSpec,
    artifact: Artifact,
    seeds: Sequence[tuple[int, int]],
    on_episode: EpisodeCallback | None = None,
) -> list[EpisodeOutcome]:
    """One episode per ``(index, seed)`` with the submitted actor; outcomes in seed order."""
    device = os.environ.get(DEVICE_VAR) or "cpu"
    env = make_env(task.env.kwargs["task"], task.eval.envs_per_shard, device)
    outcomes = rollout_envs(env, task, actor(artifact, device), seeds, on_episode)
    tried = network_attempts()
    if tried:
        raise NetworkTried(f"the isaaclab engine tried the network during a shard: {tried[:3]}")
    return outcomes


def _reset_rows(env: Any, seeds: Sequence[tuple[int, int]]) -> Any:
    """Each env ``row`` reset for its episode through Isaac Lab's seeding; the observations."""
    import torch

    for row, (_, seed) in enumerate(seeds):
        env.seed(isaac_seed(seed))
        env._reset_idx(torch.tensor([row], dtype=torch.int32, device=env.device))
    env.scene.write_data_to_sim()
    env.sim.forward()
    env.obs_buf = env._compute_observations()
    return env.obs_buf["policy"]


def rollout_envs(
    env: Any,
    task: TaskSpec,
    policy: Any,
    seeds: Sequence[tuple[int, int]],
    on_episode: EpisodeCallback | None = None,
) -> list[EpisodeOutcome]:
    """The loop (see the module docstring); ``policy`` maps the observation batch to actions."""
    import torch

    n = len(seeds)
    if n == 0:
        return []
    if n > env.num_envs:
        raise ValueError(f"a shard of {n} episodes for {env.num_envs} envs")
    limit = task.env.max_episode_steps
    if int(env.max_episode_length) != limit:
        raise RuntimeError(
            f"{task.env.kwargs['task']} runs {env.max_episode_length} steps an episode here; "
            f"the task says {limit} (env.max_episode_steps)"
        )
    obs = _reset_rows(env, seeds)
    ids = [index for index, _ in seeds]
    returns = torch.zeros(n, dtype=torch.float64)
    outcomes: list[EpisodeOutcome | None] = [None] * n
    running = torch.ones(n, dtype=torch.bool)
    with torch.inference_mode():
        for step in range(1, limit + 1):
            action = policy(obs)
            bad = ~torch.isfinite(action[:n]).all(dim=1) & running
            if bad.any():
                row = int(bad.nonzero()[0])
                raise PolicyFault("action", "non-finite", ids[row], step)
            obs_dict, reward, terminated, truncated, _ = env.step(action)
            obs = obs_dict["policy"]
            reward = reward[:n].double().cpu()
            bad = ~torch.isfinite(reward) & running
            if bad.any():
                row = int(bad.nonzero()[0])
                raise PolicyFault("reward", "non-finite", ids[row], step)
            returns += torch.where(running, reward, 0.0)
            ended = (terminated[:n] | truncated[:n]).cpu() & running
            for row in ended.nonzero().flatten().tolist():
                outcome = EpisodeOutcome(ids[row], float(returns[row]), step, bool(terminated[row]))
                outcomes[row] = outcome
                if on_episode is not None:
                    on_episode(outcome)
            running &= ~ended
            if not running.any():
                break
    missing = [ids[r] for r, o in enumerate(outcomes) if o is None]
    if missing:
        raise RuntimeError(f"episodes {missing[:5]} did not end within {limit} steps")
    return [o for o in outcomes if o is not None]
