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

With ``--executor ray`` it also compares the two executors in the same run: the
evaluator's pipeline on the local executor (worker processes) and on the Ray
executor (a private local Ray instance), the same layout and seeds for both,
``--reps`` timed runs each, alternating A/B (the order flips every rep, so drift on
a shared host hits both), at 1 and 2 workers. It prints medians with the spread
(min-max), the Ray/local ratio per worker count, the 1 -> 2 worker scaling of
each, and whether the outcomes were identical (they must be).

Usage::

    python benchmarks/batch_eval.py [--episodes 64] [--workers 2] [--json]
    python benchmarks/batch_eval.py --executor ray [--reps 5] [--json]

With ``--json`` the last line is one JSON object with the keys
``evaluator_steps_per_s``, ``naive_steps_per_s``, ``rollout_steps_per_s`` (and with
``--executor ray`` an ``executors`` object: per worker count, both executors'
median steps/s, their spread and ``ray_vs_local``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import mujoco
import numpy as np
from mujoco import rollout

from ale_robotics.evaluator.execution import Executor, LocalExecutor, make_executor
from ale_robotics.evaluator.pipeline import EpisodeOutcome
from ale_robotics.rollouts.mujoco_rollout import FAMILIES
from ale_robotics.rollouts.policy import MLPPolicy
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


def with_layout(task: TaskSpec, episodes: int, per_shard: int) -> TaskSpec:
    return task.model_copy(
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


def bench_evaluator(
    task: TaskSpec, weights: dict[str, np.ndarray], episodes: int, workers: int
) -> tuple[float, int]:
    big = with_layout(task, episodes, math.ceil(episodes / workers))
    pool = LocalExecutor(workers)
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


def _timed(
    executor: Executor, task: TaskSpec, weights: dict[str, np.ndarray], seeds: list[int]
) -> tuple[float, list[EpisodeOutcome]]:
    t0 = time.perf_counter()
    outcomes = executor.run(task, weights, seeds)
    return time.perf_counter() - t0, outcomes


def compare_executors(
    task: TaskSpec, weights: dict[str, np.ndarray], episodes: int, reps: int
) -> dict[str, Any]:
    """Local vs Ray at 1 and 2 workers, alternating A/B; one layout for every run."""
    counts = (1, 2)
    big = with_layout(task, episodes, math.ceil(episodes / max(counts)))
    seeds = [1000 + i for i in range(episodes)]
    # the Ray instance gets the most CPUs any count needs; fewer workers = fewer in flight
    executors: dict[tuple[str, int], Executor] = {}
    for n in sorted(counts, reverse=True):
        executors["ray", n] = make_executor("ray", workers=n)
        executors["local", n] = make_executor("local", workers=n)
    walls: dict[tuple[str, int], list[float]] = {key: [] for key in executors}
    identical = True
    steps = 0
    try:
        for ex in executors.values():  # warm-up: workers spawned, envs built
            ex.run(big, weights, [10_000 + i for i in range(episodes)])
        for rep in range(reps):
            for n in counts:
                order = ("local", "ray") if rep % 2 == 0 else ("ray", "local")
                got = {}
                for kind in order:
                    wall, got[kind] = _timed(executors[kind, n], big, weights, seeds)
                    walls[kind, n].append(wall)
                identical = identical and got["local"] == got["ray"]
                steps = sum(o.length for o in got["local"])
    finally:
        for ex in executors.values():
            ex.shutdown()
    table: dict[str, Any] = {}
    for n in counts:
        row: dict[str, Any] = {}
        for kind in ("local", "ray"):
            rates = [steps / w for w in walls[kind, n]]
            row[kind] = {
                "median_steps_per_s": statistics.median(rates),
                "min_steps_per_s": min(rates),
                "max_steps_per_s": max(rates),
            }
        ratios = [lw / rw for lw, rw in zip(walls["local", n], walls["ray", n], strict=True)]
        row["ray_vs_local"] = row["ray"]["median_steps_per_s"] / row["local"]["median_steps_per_s"]
        row["ray_vs_local_per_rep"] = ratios
        table[str(n)] = row
    return {
        "reps": reps,
        "env_steps": steps,
        "envs_per_shard": big.eval.envs_per_shard,
        "identical": identical,
        "by_workers": table,
        "scaling_1_to_2": {
            kind: table["2"][kind]["median_steps_per_s"] / table["1"][kind]["median_steps_per_s"]
            for kind in ("local", "ray")
        },
    }


def print_comparison(task: TaskSpec, episodes: int, cmp: dict[str, Any]) -> None:
    print(
        f"executors: {task.id}, {episodes} episodes, {cmp['env_steps']} env steps, "
        f"{cmp['envs_per_shard']} envs/shard, {cmp['reps']} reps alternating A/B"
    )
    print("  workers   local steps/s [min-max]        ray steps/s [min-max]          ray/local")
    for n, row in cmp["by_workers"].items():
        cells = [
            f"{row[k]['median_steps_per_s']:9,.0f} [{row[k]['min_steps_per_s']:,.0f}-"
            f"{row[k]['max_steps_per_s']:,.0f}]"
            for k in ("local", "ray")
        ]
        per_rep = ", ".join(f"{r:.2f}" for r in row["ray_vs_local_per_rep"])
        print(
            f"  {n:>7}   {cells[0]:29s}  {cells[1]:29s}  {row['ray_vs_local']:5.2f}x "
            f"(per rep: {per_rep})"
        )
    sc = cmp["scaling_1_to_2"]
    print(f"  scaling 1 -> 2 workers: local {sc['local']:.2f}x, ray {sc['ray']:.2f}x")
    print(f"  outcomes identical local vs ray: {'yes' if cmp['identical'] else 'NO'}")


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
    ap.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="'ray': also compare the Ray executor with the local one (same run)",
    )
    ap.add_argument("--reps", type=int, default=5, help="timed runs per executor (--executor ray)")
    ap.add_argument("--json", action="store_true", help="end with one JSON line")
    args = ap.parse_args()

    task = default_registry().get(args.task)
    weights, source = load_policy(task)
    ev, steps = bench_evaluator(task, weights, args.episodes, args.workers)
    horizon = max(1, steps // args.episodes)
    naive = bench_naive(task, weights, min_steps=min(steps, 20_000))
    ref = bench_rollout(task, weights, args.episodes, horizon, args.workers)
    cmp = None
    if args.executor == "ray":
        cmp = compare_executors(task, weights, args.episodes, args.reps)

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
    if cmp is not None:
        print_comparison(task, args.episodes, cmp)
    if args.json:
        doc: dict[str, Any] = {
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
        if cmp is not None:
            doc["executors"] = cmp
        print(json.dumps(doc))


if __name__ == "__main__":
    main()
