"""float64 actions reach the envs unrounded, so remote runs give the local numbers.

The TD3 authors' ``main.py`` sends float64 actions (numpy's default dtype: policy
output plus Gaussian noise, clipped). A local MuJoCo env uses them as they are;
the client used to cast them to the spec's float32, so a remote run drifted from
the local one (final eval 139.3 vs 193.3). Real gRPC on real Unix sockets against
local Gymnasium on the same seeds; equality is exact.
"""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from helpers import run_bound_evaluator

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.tasks import Registry

TASK = "td3-hopper-v1"
GYM_ID = "Hopper-v5"
RUN = "run-f64-1"


@pytest.fixture(scope="module")
def hevaluator(registry: Registry) -> Iterator[RunningEvaluator]:
    with run_bound_evaluator(registry, TASK, RUN) as running:
        yield running


def _agent(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN)


def _td3_action(rng: np.random.Generator, obs: np.ndarray, dim: int) -> np.ndarray:
    """main.py's exploration: a (here linear, fixed) policy plus N(0, 0.1), clipped; float64."""
    policy = np.tanh(obs[:dim] * 0.5)
    return (policy + rng.normal(0, 0.1, size=dim)).clip(-1.0, 1.0)


def _rollout(env: gym.Env, steps: int) -> tuple[list[np.ndarray], list[float], int]:
    rng = np.random.default_rng(7)
    dim = env.action_space.shape[0]
    obs, _ = env.reset(seed=5)
    observations, rewards, episodes = [obs], [], 0
    for _ in range(steps):
        action = _td3_action(rng, obs, dim)
        assert action.dtype == np.float64
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        rewards.append(float(reward))
        if terminated or truncated:
            episodes += 1
            obs, _ = env.reset()
            observations.append(obs)
    return observations, rewards, episodes


def test_td3_float64_actions_give_exactly_the_local_numbers(hevaluator: RunningEvaluator) -> None:
    """Observations and rewards of a TD3-style run equal local Gymnasium's bit for bit."""
    remote = RemoteEnv(_agent(hevaluator), own_client=True)
    local = gym.make(GYM_ID, max_episode_steps=1000)
    try:
        got_obs, got_rewards, episodes = _rollout(remote, 300)
        want_obs, want_rewards, _ = _rollout(local, 300)
    finally:
        remote.close()
        local.close()
    assert episodes >= 2, "the run should cross episode boundaries"
    assert got_rewards == want_rewards
    assert len(got_obs) == len(want_obs)
    for got, want in zip(got_obs, want_obs, strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_vector_env_takes_float64_actions_as_sync_vector_env_does(
    hevaluator: RunningEvaluator,
) -> None:
    """The same for a batched session against SyncVectorEnv (float64 batch actions)."""
    n = 3
    remote = RemoteVectorEnv(_agent(hevaluator), num_envs=n, own_client=True)
    local = gym.vector.SyncVectorEnv([lambda: gym.make(GYM_ID, max_episode_steps=1000)] * n)
    rng = np.random.default_rng(3)
    try:
        got, _ = remote.reset(seed=11)
        want, _ = local.reset(seed=11)
        for _ in range(60):
            actions = rng.uniform(-1, 1, (n, remote.single_action_space.shape[0]))
            got, got_r, got_term, _, _ = remote.step(actions)
            want, want_r, want_term, _, _ = local.step(actions)
            assert np.array_equal(got, want) and np.array_equal(got_r, want_r)
            assert np.array_equal(got_term, want_term)
    finally:
        remote.close()
        local.close()
