"""The mujoco.rollout backend must reproduce Gymnasium's episodes, and serve its task."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import random_weights

from ale_robotics.evaluator.pipeline import rollout_episodes
from ale_robotics.evaluator.pool import RolloutPool
from ale_robotics.rollouts.mujoco_rollout import FAMILIES, rollout_vectorized
from ale_robotics.rollouts.policy import MLPPolicy
from ale_robotics.tasks import EnvSpec, Registry


@pytest.fixture(scope="module")
def cheetah(registry: Registry):
    task = registry.get("td3-halfcheetah-vec-v1")
    short = task.env.model_copy(update={"max_episode_steps": 20})
    return task.model_copy(update={"env": EnvSpec.model_validate(short.model_dump())})


@pytest.mark.parametrize("nthread", [1, 2])
def test_matches_gymnasium_step_for_step(cheetah, nthread: int) -> None:
    """Same episodes through Gymnasium envs (backend 'gymnasium') and through mujoco.rollout.

    Both batch the policy over the same rows, so actions agree given equal
    observations. Over 20 steps the only difference (a cold solver start per
    control step, see the module docs) stays at rounding level; random gaits are
    chaotic enough that longer episodes drift apart, which is why this is short.
    """
    w = random_weights(cheetah, seed=7, scale=0.2)
    policy = MLPPolicy(cheetah.policy, w, np.ones(6, np.float32))
    seeds = [(0, 31), (1, 32), (2, 33)]
    got = rollout_vectorized(cheetah, policy, seeds, nthread=nthread)
    gym_task = cheetah.model_copy(
        update={"eval": cheetah.eval.model_copy(update={"rollout": "gymnasium"})}
    )
    reference = rollout_episodes(gym_task, w, seeds)
    assert [g[0] for g in got] == [r.index for r in reference] == [0, 1, 2]
    for (_, ret, length), ref in zip(got, reference, strict=True):
        assert length == ref.length == 20
        assert ret == pytest.approx(ref.ret, rel=1e-9, abs=1e-9)


def test_results_do_not_depend_on_thread_count(cheetah) -> None:
    long = cheetah.model_copy(
        update={"env": cheetah.env.model_copy(update={"max_episode_steps": 200})}
    )
    w = random_weights(long, seed=9, scale=0.2)
    policy = MLPPolicy(long.policy, w, np.ones(6, np.float32))
    seeds = [(i, 40 + i) for i in range(6)]
    assert rollout_vectorized(long, policy, seeds, 1) == rollout_vectorized(long, policy, seeds, 2)


def test_unknown_family_is_refused(task) -> None:
    assert task.env.gym_id not in FAMILIES
    with pytest.raises(ValueError, match="no vectorized backend"):
        rollout_vectorized(task, lambda o: o, [(0, 1)])


def test_pool_uses_the_native_backend_deterministically(cheetah) -> None:
    w = random_weights(cheetah, seed=8, scale=0.2)
    pool = RolloutPool(workers=2)
    try:
        a = pool.run(cheetah, w, list(range(60, 64)))
        b = pool.run(cheetah, w, list(range(60, 64)))
    finally:
        pool.shutdown()
    assert a == b and all(o.length == 20 and not o.terminated for o in a)
