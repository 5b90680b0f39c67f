"""Batch-evaluation throughput: the evaluator's pipeline vs a naive loop vs mujoco.rollout.

All three run the same policy on the same MuJoCo model in one process tree, in
one run, so the ratios are comparable on whatever machine runs this:

* ``evaluator``: the evaluator's own rollout pool (worker processes, batched
  numpy inference, Gymnasium envs), warm (pool already started), as a job sees it;
* ``naive``: one Gymnasium env, one episode after another, one MLP call per step;
* ``rollout``: a closed-loop reference on raw MuJoCo: all envs' states stepped
  together by ``mujoco.rollout`` (``nthread`` = workers), the policy evaluated
  batched between control steps. It skips Gymnasium's per-step Python work
  (reward, termination, wrappers), so it is the ceiling to compare against.

Usage::

    python benchmarks/batch_eval.py [--episodes 64] [--workers 2] [--json]

With ``--json`` the last line is one JSON object with the keys
``evaluator_steps_per_s``, ``naive_steps_per_s``, ``rollout_steps_per_s``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import mujoco
import numpy as np
from mujoco import rollout

from ale_robotics.evaluator.pipeline import MLPPolicy
from ale_robotics.evaluator.pool import RolloutPool
from ale_robotics.evaluator.vector_backend import FAMILIES
from ale_robotics.tasks import TaskSpec, default_registry

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"


def load_policy(task: TaskSpec) -> tuple[dict[str, np.ndarray], str]:
    """The shipped TD3 checkpoint (full-length episodes), else small random weights."""
    assert task.contract is not None
    if CHECKPOINT.exists() and task.id == "td3-inverted-pendulum-v1":
        from safetensors.numpy import load_file

        return load_file(str(CHECKPOINT)), "shipped TD3 checkpoint"
    rng = np.random.default_rng(0)
    return {
        r.key: (rng.standard_normal(r.shape) * 0.05).astype(r.dtype) for r in task.contract.tensors
    }, "random weights (no checkpoint found)"


def bench_evaluator(
    task: TaskSpec, weights: dict[str, np.ndarray], episodes: int, workers: int
) -> tuple[float, int]:
    per_shard = math.ceil(episodes / workers)
    big = task.model_copy(
        update={
            "eval": task.eval.model_copy(
                update={
                    "episodes": episodes,
                    "base_seeds": list(range(1, episodes + 1)),
                    "envs_per_shard": per_shard,
                }
            )
        }
    )
    pool = RolloutPool(workers)
    try:
        # Warm-up with the same layout: spawns the workers and builds their envs once,
        # as in a long-running evaluator.
        pool.run(big, weights, [10_000 + i for i in range(episodes)])
        t0 = time.perf_counter()
        outcomes = pool.run(big, weights, [1000 + i for i in range(episodes)])
        wall = time.perf_counter() - t0
    finally:
        pool.shutdown()
    steps = sum(o.length for o in outcomes)
    return steps / wall, steps


def bench_naive(task: TaskSpec, weights: dict[str, np.ndarray], min_steps: int) -> float:
    assert task.policy is not None
    env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    policy = MLPPolicy(task.policy, weights, env.action_space.high)
    steps, seed = 0, 0
    t0 = time.perf_counter()
    while steps < min_steps:
        obs, _ = env.reset(seed=seed)
        seed += 1
        while True:
            obs, _, term, trunc, _ = env.step(policy(obs[None])[0])
            steps += 1
            if term or trunc:
                break
    return steps / (time.perf_counter() - t0)


def bench_rollout(
    task: TaskSpec, weights: dict[str, np.ndarray], batch: int, horizon: int, nthread: int
) -> float:
    assert task.policy is not None
    env = gym.make(task.env.gym_id).unwrapped
    model, frame_skip = env.model, env.frame_skip
    policy = MLPPolicy(task.policy, weights, env.action_space.high)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    data = mujoco.MjData(model)
    state = np.zeros((batch, mujoco.mj_stateSize(model, spec)))
    rng = np.random.default_rng(0)
    for i in range(batch):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = env.init_qpos + rng.uniform(-0.01, 0.01, model.nq)
        data.qvel[:] = env.init_qvel + rng.uniform(-0.01, 0.01, model.nv)
        mujoco.mj_getState(model, data, state[i], spec)
    runner = rollout.Rollout(nthread=nthread)
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    qpos = slice(1, 1 + model.nq)
    qvel = slice(1 + model.nq, 1 + model.nq + model.nv)
    family = FAMILIES.get(task.env.gym_id)
    obs_dim = env.observation_space.shape[0]
    warmstart = np.zeros((batch, model.nv))
    t0 = time.perf_counter()
    for _ in range(horizon):
        if family is not None:
            obs = family.obs(env, state[:, qpos], state[:, qvel])
        else:
            obs = np.concatenate([state[:, qpos], state[:, qvel]], axis=1)[:, :obs_dim]
        act = policy(obs).astype(np.float64)
        control = np.repeat(act[:, None, :], frame_skip, axis=1)
        out, _ = runner.rollout(
            model, datas, state, control, nstep=frame_skip, initial_warmstart=warmstart
        )
        state = out[:, -1, :]
    wall = time.perf_counter() - t0
    runner.close()
    return batch * horizon / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="td3-inverted-pendulum-v1")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", action="store_true", help="end with one JSON line")
    args = ap.parse_args()

    task = default_registry().get(args.task)
    weights, source = load_policy(task)
    ev, steps = bench_evaluator(task, weights, args.episodes, args.workers)
    horizon = max(1, steps // args.episodes)
    naive = bench_naive(task, weights, min_steps=min(steps, 20_000))
    ref = bench_rollout(task, weights, args.episodes, horizon, args.workers)

    print(f"task {task.id} ({task.env.gym_id}), policy: {source}")
    print(f"{args.episodes} episodes, {steps} env steps, {args.workers} workers")
    rows = [
        ("evaluator pipeline", ev),
        ("naive gymnasium loop", naive),
        ("mujoco.rollout ref", ref),
    ]
    for name, rate in rows:
        print(
            f"  {name:20s} {rate:12,.0f} steps/s   {rate / ref:5.2f}x rollout   "
            f"{rate / naive:5.2f}x naive"
        )
    if args.json:
        print(
            json.dumps(
                {
                    "task": task.id,
                    "episodes": args.episodes,
                    "workers": args.workers,
                    "env_steps": steps,
                    "evaluator_steps_per_s": ev,
                    "naive_steps_per_s": naive,
                    "rollout_steps_per_s": ref,
                    "evaluator_vs_rollout": ev / ref,
                    "evaluator_vs_naive": ev / naive,
                }
            )
        )


if __name__ == "__main__":
    main()
