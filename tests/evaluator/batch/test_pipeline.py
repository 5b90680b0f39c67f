"""The native pipeline must reproduce a plain Gymnasium loop exactly, and be deterministic."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from helpers import random_weights

from ale_robotics.evaluator.batch.pipeline import rollout_episodes, summarize
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.rollouts.mlp import MLPPolicy
from ale_robotics.tasks import TaskSpec


def _naive(task: TaskSpec, weights, seed: int) -> tuple[float, int]:
    """The reference: one env, one episode, torch-free MLP evaluated row by row."""
    assert task.policy is not None
    env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    high = env.action_space.high
    obs, _ = env.reset(seed=seed)
    total, n = 0.0, 0
    while True:
        x = obs.astype(np.float32)
        for i, name in enumerate(task.policy.layer_names):
            x = weights[f"{name}.weight"] @ x + weights[f"{name}.bias"]
            if i < len(task.policy.layer_names) - 1:
                x = np.maximum(x, 0)
        obs, r, term, trunc, _ = env.step((np.tanh(x) * high).astype(np.float32))
        total += float(r)
        n += 1
        if term or trunc:
            return total, n


def test_mlp_matches_torch(task: TaskSpec) -> None:
    import torch

    w = random_weights(task, seed=3, scale=0.5)
    assert task.policy is not None
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 400),
        torch.nn.ReLU(),
        torch.nn.Linear(400, 300),
        torch.nn.ReLU(),
        torch.nn.Linear(300, 1),
        torch.nn.Tanh(),
    )
    sd = {
        f"{i}.{p}": torch.from_numpy(w[f"{n}.{p}"])
        for i, n in zip((0, 2, 4), task.policy.layer_names, strict=True)
        for p in ("weight", "bias")
    }
    net.load_state_dict(sd)
    obs = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    expected = net(torch.from_numpy(obs)).detach().numpy() * 3.0
    got = MLPPolicy(task.policy, w, np.array([3.0], np.float32))(obs)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_batched_rollout_equals_naive_single_env_loop(task: TaskSpec) -> None:
    w = random_weights(task, seed=1, scale=0.3)
    seeds = [(0, 11), (1, 12), (2, 13)]
    batched = rollout_episodes(task, w, seeds)
    for out, (_, seed) in zip(batched, seeds, strict=True):
        ret, length = _naive(task, w, seed)
        assert out.length == length
        assert out.ret == pytest.approx(ret, rel=1e-6)


def test_pool_is_deterministic_and_independent_of_worker_count(task: TaskSpec) -> None:
    w = random_weights(task, seed=2, scale=0.3)
    seeds = list(range(100, 110))
    one = LocalExecutor(workers=1)
    two = LocalExecutor(workers=2)
    try:
        a = one.run(task, w, seeds)
        b = two.run(task, w, seeds)
        c = two.run(task, w, seeds)
    finally:
        one.shutdown()
        two.shutdown()
    assert a == b == c
    assert [o.index for o in a] == list(range(10))
    assert summarize(a)["mean_episode_length"] == np.mean([o.length for o in a])


def test_progress_reaches_the_total(task: TaskSpec) -> None:
    seen: list[int] = []
    pool = LocalExecutor(workers=1)
    try:
        pool.run(task, random_weights(task), [1, 2, 3, 4, 5, 6], on_progress=seen.append)
    finally:
        pool.shutdown()
    assert seen and seen[-1] == 6 and seen == sorted(seen)
