"""``ale_robotics.client.sb3.RemoteVecEnv``: SB3 trains over one batched session.

SB3 could not use ``RemoteVectorEnv`` (not a ``VecEnv``), so vectorized SB3 training
took N sessions and one Step call per env per step. The adapter must behave as SB3's
own ``DummyVecEnv`` over local envs (terminal observations, ``TimeLimit.truncated``,
reset infos, seeding), so that SB3's algorithms and wrappers run on it unchanged.
Real gRPC on real Unix sockets; training runs are kept to a few thousand steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import run_bound_evaluator
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize

from ale_robotics.client import AleClient
from ale_robotics.client.sb3 import RemoteVecEnv
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.tasks import Registry

TASK = "td3-inverted-double-pendulum-v1"
GYM_ID = "InvertedDoublePendulum-v5"
RUN = "run-sb3-1"


@pytest.fixture(scope="module")
def bevaluator(registry: Registry) -> Iterator[RunningEvaluator]:
    with run_bound_evaluator(registry, TASK, RUN) as running:
        yield running


def _venv(ev: RunningEvaluator, n: int) -> RemoteVecEnv:
    client = AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN)
    return RemoteVecEnv(client, num_envs=n, own_client=True)


def _same_info(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and np.array_equal(got[key], value), key
        else:
            assert got[key] == value, key


def test_the_vecenv_behaves_as_dummy_vec_env_over_local_envs(
    bevaluator: RunningEvaluator,
) -> None:
    """Step for step: observations, float32 rewards, dones, terminal observations,
    ``TimeLimit.truncated`` and reset infos, from the same ``seed()``."""
    n = 4
    remote = _venv(bevaluator, n)
    local = DummyVecEnv([lambda: gym.make(GYM_ID, max_episode_steps=1000)] * n)
    try:
        assert remote.num_envs == local.num_envs
        assert remote.observation_space == local.observation_space
        assert remote.action_space == local.action_space
        remote.seed(9)
        local.seed(9)
        assert np.array_equal(remote.reset(), local.reset())
        for got, want in zip(remote.reset_infos, local.reset_infos, strict=True):
            _same_info(got, want)
        rng = np.random.default_rng(0)
        dones = 0
        for _ in range(60):
            actions = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
            g_obs, g_rew, g_done, g_info = remote.step(actions)
            w_obs, w_rew, w_done, w_info = local.step(actions)
            assert np.array_equal(g_obs, w_obs)
            assert g_rew.dtype == w_rew.dtype and np.array_equal(g_rew, w_rew)
            assert np.array_equal(g_done, w_done)
            for got, want in zip(g_info, w_info, strict=True):
                _same_info(got, want)
            for got, want in zip(remote.reset_infos, local.reset_infos, strict=True):
                _same_info(got, want)
            dones += int(w_done.sum())
        assert dones >= n, "episodes should end (terminal observations compared)"
    finally:
        remote.close()
        local.close()


def test_ppo_trains_with_8_envs_in_one_session(bevaluator: RunningEvaluator) -> None:
    """A short PPO run over VecMonitor(RemoteVecEnv(8 envs)): one session the whole run,
    episodes recorded, the policy updated, every step charged to the run."""
    manager = bevaluator.evaluator.sessions
    used_before = bevaluator.evaluator.training.used(RUN)
    venv = VecMonitor(_venv(bevaluator, 8))
    try:
        assert manager.count(RUN) == 1
        torch.manual_seed(0)
        model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, n_epochs=2, seed=0)
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(total_timesteps=2048)
        assert manager.count(RUN) == 1
        assert model.num_timesteps == 2048
        assert len(model.ep_info_buffer) > 10  # VecMonitor saw the episodes end
        after = list(model.policy.parameters())
        changed = [not torch.equal(a, b) for a, b in zip(before, after, strict=True)]
        assert any(changed)
        assert bevaluator.evaluator.training.used(RUN) - used_before >= 2048
    finally:
        venv.close()
    assert manager.count(RUN) == 0


def test_vec_normalize_and_evaluate_policy_run_on_it(bevaluator: RunningEvaluator) -> None:
    """SB3's wrappers and helpers that third-party scripts use, unchanged."""
    venv = VecNormalize(_venv(bevaluator, 2), norm_reward=False)
    try:
        model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=1)
        model.learn(total_timesteps=128)
        mean, std = evaluate_policy(model, venv, n_eval_episodes=4, warn=False)
        assert np.isfinite(mean) and np.isfinite(std) and mean > 0
        assert venv.get_attr("max_episode_steps") == [1000, 1000]
        assert venv.env_is_wrapped(gym.Wrapper) == [False, False]
    finally:
        venv.close()
