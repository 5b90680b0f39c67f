"""The native stepper's reset equals each env's own ``env.reset``, to the bit.

An interactive session resets its envs through :meth:`NativeStepper.reset` (seeding,
``mj_resetData``, the family's draw, ``mj_forward``, observation and info for all at
once) instead of each env's ``reset``. Nothing a client, the next step or a later reset
can see may differ: observation (values and dtype), info (keys, values, scalar types),
the whole ``MjData`` state and the quantities ``mj_forward`` derives, the env's random
generator afterwards, and the wrappers' state. Each case is checked against twins of
the same envs reset by Gymnasium, after steps that moved them apart from their start.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from ale_robotics.envs.make import make_env
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES
from ale_robotics.rollouts.mujoco_rollout.stepper import NativeStepper
from ale_robotics.tasks import EnvSpec

STATE = int(mujoco.mjtState.mjSTATE_INTEGRATION) | int(mujoco.mjtState.mjSTATE_WARMSTART)
"""Every piece of state ``mj_step`` reads (INTEGRATION includes the warm start: named anyway)."""
DERIVED = ("xpos", "site_xpos", "qfrc_constraint", "qacc", "sensordata", "cinert")
"""Some of what ``mj_forward`` computes from the state: a family's observation reads some."""


def _envs(gym_id: str, n: int, **kwargs: Any) -> list[Any]:
    spec = EnvSpec(gym_id=gym_id, kwargs=kwargs, max_episode_steps=50)
    return [make_env(spec) for _ in range(n)]


def _state(env: Any) -> np.ndarray:
    base = env.unwrapped
    out = np.empty(mujoco.mj_stateSize(base.model, STATE))
    mujoco.mj_getState(base.model, base.data, out, STATE)
    return out


def _same_env(ours: Any, theirs: Any) -> None:
    a, b = ours.unwrapped, theirs.unwrapped
    assert np.array_equal(_state(ours), _state(theirs))
    for name in DERIVED:
        assert np.array_equal(getattr(a.data, name), getattr(b.data, name)), name
    assert a.np_random.bit_generator.state == b.np_random.bit_generator.state
    assert a.np_random_seed == b.np_random_seed
    assert ours._elapsed_steps == theirs._elapsed_steps  # TimeLimit
    assert ours.env._has_reset == theirs.env._has_reset  # OrderEnforcing


def _same_info(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        assert type(ours[key]) is type(value), key
        assert ours[key] == value, key


@pytest.mark.parametrize("gym_id", sorted(FAMILIES))
@pytest.mark.parametrize("kwargs", [{}, {"reset_noise_scale": 0.3}])
def test_native_reset_is_each_envs_own_reset(gym_id: str, kwargs: dict[str, Any]) -> None:
    if gym_id == "Reacher-v5" and kwargs:
        pytest.skip("Reacher-v5 draws fixed noise: it takes no reset_noise_scale")
    n = 4
    ours, theirs = _envs(gym_id, n, **kwargs), _envs(gym_id, n, **kwargs)
    stepper = NativeStepper(FAMILIES[gym_id], ours)
    space = ours[0].action_space
    rng = np.random.default_rng(0)
    for rounds, seeds in enumerate(([0, 1, 2, 3], [None, 9, None, 2**31 - 1], [None] * n)):
        which = [0, 1, 2, 3] if rounds != 1 else [3, 1, 0, 2]  # any order
        got_obs, got_infos = stepper.reset(which, [seeds[i] for i in which])
        for j, i in enumerate(which):
            obs, info = theirs[i].reset(seed=seeds[i])
            assert got_obs[j].dtype == obs.dtype
            assert np.array_equal(got_obs[j], obs), (gym_id, i)
            _same_info(got_infos[j], info)
            _same_env(ours[i], theirs[i])
        for _ in range(5):  # move them apart from their start before the next reset
            action = rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)
            got = stepper.step(list(range(n)), action)
            for i in range(n):
                obs, *_ = theirs[i].step(action[i])
                assert np.array_equal(got[0][i], obs)
    stepper.close()


def test_a_native_reset_counts_as_the_first_reset() -> None:
    """Fresh envs reset natively may step (OrderEnforcing saw a reset), and the TimeLimit
    starts counting from zero again after a reset mid-episode."""
    envs = _envs("Hopper-v5", 2)
    stepper = NativeStepper(FAMILIES["Hopper-v5"], envs)
    zero = np.zeros((2, *envs[0].action_space.shape), np.float32)
    with pytest.raises(gym.error.ResetNeeded):
        stepper.step([0, 1], zero)
    stepper.reset([0, 1], [0, 1])
    for _ in range(3):
        stepper.step([0, 1], zero)
    stepper.reset([1], [None])
    assert [env._elapsed_steps for env in envs] == [3, 0]
    stepper.close()


def test_a_reset_names_one_seed_per_env() -> None:
    envs = _envs("Hopper-v5", 2)
    with pytest.raises(ValueError, match="1 seeds for 2 envs"):
        NativeStepper(FAMILIES["Hopper-v5"], envs).reset([0, 1], [0])
