"""The dm_control and Meta-World Gymnasium adapters: TD-MPC2's protocol, and seeds that
fully determine an episode (the evaluator's hidden seeds rely on it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ale_robotics.envs.dmc import _seed_in_place

DMC = ["ale_robotics.envs:DMC-cheetah-run-v0", "ale_robotics.envs:DMC-walker-run-v0"]
MW = "ale_robotics.envs:MW-push-v3-v0"
BIG_SEED = 2**62 + 12345  # hidden seeds have 63 bits


def _make(gym_id: str) -> Any:
    return gym.make(gym_id, disable_env_checker=True)


def _episode(env: Any, seed: int, steps: int | None = None) -> tuple[list[bytes], float, Any]:
    """Observations (as bytes), return and last info of one episode under fixed actions."""
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=seed)
    seen, ret, info, n = [obs.tobytes()], 0.0, {}, 0
    while steps is None or n < steps:
        action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
        seen.append(obs.tobytes())
        ret += float(reward)
        n += 1
        if terminated or truncated:
            break
    return seen, ret, info


@pytest.mark.parametrize("gym_id", [*DMC, MW])
def test_a_seed_determines_the_episode_whatever_ran_before(gym_id: str) -> None:
    used = _make(gym_id)
    _episode(used, 7, steps=30)  # history that a reseeded reset must erase
    _episode(used, BIG_SEED, steps=5)
    again = _episode(used, BIG_SEED, steps=30)
    fresh = _episode(_make(gym_id), BIG_SEED, steps=30)
    other = _episode(_make(gym_id), BIG_SEED + 1, steps=30)
    assert again[0] == fresh[0] and again[1] == fresh[1]
    assert other[0][0] != fresh[0][0], "another seed gave the same initial state"


@pytest.mark.parametrize("gym_id", DMC)
def test_dmc_follows_tdmpc2_action_repeat_and_episode_length(gym_id: str) -> None:
    """500 agent steps of 2 env steps, the return summed over all 1000 env steps, as the
    suite computes it with the same RandomState seed and actions."""
    from dm_control import suite

    from ale_robotics.envs import DMC_TASKS

    env = gym.make(gym_id, max_episode_steps=500, disable_env_checker=True)
    assert env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=3)
    raw = suite.load(*DMC_TASKS[gym_id.split(":")[1]], task_kwargs={"random": 3})
    ts = raw.reset()
    flat = np.concatenate([np.asarray(v, np.float64).ravel() for v in ts.observation.values()])
    assert np.array_equal(obs, flat.astype(np.float32))
    rng = np.random.default_rng(0)
    ours = suite_return = 0.0
    steps = 0
    truncated = False
    while not truncated:
        action = rng.uniform(-1, 1, 6).astype(np.float32)
        obs, reward, terminated, truncated, _ = env.step(action)
        assert not terminated
        ours += reward
        steps += 1
        for _ in range(2):
            suite_return += raw.step(action.astype(np.float64)).reward
    assert steps == 500 and raw._step_count == 1000
    assert ours == pytest.approx(suite_return, rel=1e-12)


def test_metaworld_episode_is_100_agent_steps_of_2_env_steps_with_success_info() -> None:
    env = gym.make(MW, max_episode_steps=100, disable_env_checker=True)
    assert env.observation_space.shape == (39,) and env.observation_space.dtype == np.float32
    _, _, info = _episode(env, 11)
    assert env.unwrapped._env.curr_path_length == 200
    assert "success" in info and "obj_to_target" in info


def test_metaworld_draws_a_new_variant_per_episode_from_its_own_rng() -> None:
    env = _make(MW)
    state = np.random.get_state()
    goals = {tuple(env.reset(seed=s)[0][36:39]) for s in range(5)}
    pucks = {tuple(env.reset()[0][4:7]) for _ in range(3)}  # unseeded: the stream goes on
    assert len(goals) == 5 and len(pucks) == 3
    after = np.random.get_state()
    assert state[0] == after[0] and np.array_equal(state[1], after[1]), "global RNG touched"


def test_large_seeds_seed_a_randomstate_by_words() -> None:
    a, b = np.random.RandomState(), np.random.RandomState()
    _seed_in_place(a, BIG_SEED)
    _seed_in_place(b, BIG_SEED)
    assert a.randint(2**31) == b.randint(2**31)
    _seed_in_place(a, 5)
    assert a.randint(2**31) == np.random.RandomState(5).randint(2**31)
    with pytest.raises(ValueError, match="non-negative"):
        _seed_in_place(a, -1)
