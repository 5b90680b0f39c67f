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

**The limit.** The ``rollout`` reference is not a ceiling (it runs the policy on one
thread, so the evaluator beats it). The limit is measured in the same run from its
two parts, each on all cores:

* ``P``, physics only: the evaluator's own closed-loop actions replayed open loop by
  one ``mujoco.rollout`` call over the whole horizon (no Python between steps), on a
  thread pool of each size from 1 to the core count (the best counts: ``nthread``
  tuned);
* ``Q``, policy only: the task's MLP on observation batches of the evaluator's shard
  size, one process per core, summed;

and ``limit = 1 / (1/P + 1/Q)``: physics and inference perfectly overlapped on all
cores, with nothing else (no reward, observation, reset or bookkeeping). The
evaluator's ratio to it is ``evaluator_over_limit`` (target >= 0.8). ``--rounds`` repeats
all of them (evaluator, P, Q, order rotated every round) and reports medians with the
spread.

**From CPU time.** Wall-clock rates measured one after another are only comparable on a
quiet host: other load slows whichever part it lands on (on a busy host the wall ratio went
above 1, 1.28 and 1.72 in two rounds). So the ratio is also taken from CPU time, which
another process's load barely moves (shared caches aside): the physics' CPU per env step
(the least over the thread counts) plus the policy's CPU per row, over the evaluator's CPU
per env step (this process and its workers, every thread, from ``/proc``):
``evaluator_over_limit_cpu``. The pipeline spends at least physics and policy, so it stays
at or below 1 under load (up to the noise of measurements taken apart); what it lacks of 1
is the pipeline's own cost.

The policy is one that plays full-length episodes, as a trained agent's does: the
shipped TD3 checkpoint for the pendulum, a standing controller (a linear feedback
written into the contract's MLP) for Hopper and Walker2d, small random weights for
the envs that never terminate. Random weights would make Hopper and Walker2d fall
within ~20 steps and measure resets, not stepping.

With ``--executor ray`` it also compares the two executors in the same run: the
evaluator's pipeline on the local executor (worker processes) and on the Ray
executor (a private local Ray instance), the same layout and seeds for both,
``--reps`` timed runs each, alternating A/B (the order flips every rep, so drift on
a shared host hits both), at 1 and 2 workers. It prints medians with the spread
(min-max), the Ray/local ratio per worker count, the 1 -> 2 worker scaling of
each, and whether the outcomes were identical (they must be).

Usage::

    python benchmarks/batch_eval.py [--task ID|all] [--episodes 64] [--workers 2]
                                    [--rounds 3] [--json]
    python benchmarks/batch_eval.py --executor ray [--reps 5] [--json]

With ``--json`` the last line is one JSON object with the keys
``evaluator_steps_per_s``, ``naive_steps_per_s``, ``rollout_steps_per_s``,
``physics_steps_per_s`` (P), ``policy_steps_per_s`` (Q), ``limit_steps_per_s``,
``evaluator_over_limit`` (medians over the rounds, but ``naive_steps_per_s``: the naive
loop is only the 3-4x context, measured once), ``evaluator_over_limit_per_round``, and the
same ratio from CPU time, ``evaluator_over_limit_cpu`` (and ``_per_round``) with its parts
``evaluator_cpu_us_per_step``, ``physics_cpu_us_per_step``, ``policy_cpu_us_per_step``
(and with ``--executor ray`` an ``executors`` object: per worker count, both
executors' median steps/s, their spread and ``ray_vs_local``). With ``--task all``
it is ``{"tasks": {ID: that object, ...}, "min_evaluator_over_limit": ...,
"min_evaluator_over_limit_cpu": ...}`` over every MuJoCo batch task.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
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
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.rollouts.mlp import MLPPolicy
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, StepView
from ale_robotics.tasks import TaskSpec, default_registry

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"
"""The shipped TD3 actor (trained on v1; v2 has the same env and contract)."""


def load_policy(task: TaskSpec) -> tuple[dict[str, np.ndarray], str]:
    """Weights that play full-length episodes (see the module doc), and what they are."""
    assert task.contract is not None
    if CHECKPOINT.exists() and task.env.gym_id == "InvertedPendulum-v5":
        from safetensors.numpy import load_file

        return load_file(str(CHECKPOINT)), "shipped TD3 checkpoint"
    if task.env.gym_id in STANDING:
        return standing_weights(task), "standing controller (linear feedback in the MLP)"
    rng = np.random.default_rng(0)
    return {
        r.key: (rng.standard_normal(r.shape) * 0.05).astype(r.dtype) for r in task.contract.tensors
    }, "random weights (no checkpoint found)"


STANDING = {"Walker2d-v5": 6, "Hopper-v5": 3}
"""Envs that terminate when they fall -> their number of actuated joints."""


def standing_weights(task: TaskSpec) -> dict[str, np.ndarray]:
    """The contract's ReLU MLP computing ``tanh(-1.0 * joint_angle - 0.1 * joint_velocity)``.

    A linear map passes a ReLU MLP exactly as ``relu(x) - relu(-x)``: layer 1 holds
    ``[I; -I]``, layer 2 copies those units, layer 3 applies the gains. This PD hold
    keeps Hopper and Walker2d standing for 1000 steps on every seed tried, so the
    benchmark times the same full-size matmuls over full-length episodes.
    """
    assert task.contract is not None and task.policy is not None
    shapes = {r.key: tuple(r.shape) for r in task.contract.tensors}
    names = task.policy.layer_names
    w = {k: np.zeros(shape, dtype=np.float32) for k, shape in shapes.items()}
    d = shapes[f"{names[0]}.weight"][1]
    nj = STANDING[task.env.gym_id]
    nq1 = (d - 1) // 2  # obs = qpos[1:] (nq - 1) + qvel (nv = nq): d = 2 nq - 1
    w[f"{names[0]}.weight"][:d, :] = np.eye(d)
    w[f"{names[0]}.weight"][d : 2 * d, :] = -np.eye(d)
    w[f"{names[1]}.weight"][: 2 * d, : 2 * d] = np.eye(2 * d)
    gains = np.zeros((nj, d), dtype=np.float32)
    for j in range(nj):
        gains[j, 2 + j] = -1.0  # joint angle (after z and the torso angle)
        gains[j, nq1 + 3 + j] = -0.1  # its velocity (after vx, vz, the torso's)
    w[f"{names[2]}.weight"][:, :d] = gains
    w[f"{names[2]}.weight"][:, d : 2 * d] = -gains
    return w


def with_layout(task: TaskSpec, episodes: int, per_shard: int) -> TaskSpec:
    """The task with ``episodes`` episodes in shards of ``per_shard``; for the native kind,
    threads per shard so that shards x threads = the cores, as an evaluator is deployed (the
    task's own ``threads`` is for its layout of few episodes in one shard)."""
    update: dict[str, Any] = {
        "episodes": episodes,
        "base_seeds": list(range(1, episodes + 1)),
        "envs_per_shard": per_shard,
    }
    if task.eval.rollout == "mujoco_rollout":
        update["threads"] = max(1, (os.cpu_count() or 1) // math.ceil(episodes / per_shard))
    return task.model_copy(update={"eval": task.eval.model_copy(update=update)})


def _cpu_s(pid: int) -> float:
    """utime + stime of one process (all its threads), from /proc; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_evaluator(
    task: TaskSpec, weights: dict[str, np.ndarray], episodes: int, workers: int
) -> tuple[float, int, float]:
    """The warm pipeline's rate, its env steps, and its CPU seconds per env step (this
    process, every thread, and the workers: what a job costs whatever else runs)."""
    big = with_layout(task, episodes, math.ceil(episodes / workers))
    pool = LocalExecutor(workers)
    try:
        # Warm-up with the same layout: spawns the workers and builds their envs once,
        # as in a long-running evaluator.
        pool.run(big, weights, [10_000 + i for i in range(episodes)])
        pids = pool.worker_pids()
        cpu0 = time.process_time() + sum(map(_cpu_s, pids))
        t0 = time.perf_counter()
        outcomes = pool.run(big, weights, [1000 + i for i in range(episodes)])
        wall = time.perf_counter() - t0
        cpu = time.process_time() + sum(map(_cpu_s, pids)) - cpu0
    finally:
        pool.shutdown()
    steps = sum(o.length for o in outcomes)
    return steps / wall, steps, cpu / steps


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


def _initial_states(env: Any, batch: int) -> np.ndarray:
    """FULLPHYSICS states of ``batch`` Gymnasium resets (seeds 0..batch-1)."""
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.zeros((batch, mujoco.mj_stateSize(env.model, spec)))
    for i in range(batch):
        env.reset(seed=i)
        mujoco.mj_getState(env.model, env.data, state[i], spec)
    return state


def bench_rollout(
    task: TaskSpec, weights: dict[str, np.ndarray], batch: int, horizon: int, nthread: int
) -> tuple[float, np.ndarray, np.ndarray]:
    """The closed-loop reference: its rate, and the actions it took (for :func:`bench_physics`)
    with its initial states. Falls are not cut short: every env runs ``horizon`` steps."""
    assert task.policy is not None
    env = gym.make(task.env.gym_id).unwrapped
    model, frame_skip = env.model, env.frame_skip
    policy = MLPPolicy(task.policy, weights, env.action_space.high)
    start = _initial_states(env, batch)
    state = start.copy()
    runner = rollout.Rollout(nthread=nthread)
    datas = [mujoco.MjData(model) for _ in range(max(1, nthread))]
    qpos = slice(1, 1 + model.nq)
    qvel = slice(1 + model.nq, 1 + model.nq + model.nv)
    family = FAMILIES[task.env.gym_id]
    warmstart = np.zeros((batch, model.nv))
    actions = np.zeros((batch, horizon, model.nu))
    t0 = time.perf_counter()
    for t in range(horizon):
        obs = family.observe(env, StepView(state[:, qpos], state[:, qvel], {}))
        act = policy(obs).astype(np.float64)
        actions[:, t] = act
        control = np.repeat(act[:, None, :], frame_skip, axis=1)
        out, _ = runner.rollout(
            model, datas, state, control, nstep=frame_skip, initial_warmstart=warmstart
        )
        state = out[:, -1, :]
    wall = time.perf_counter() - t0
    runner.close()
    env.close()
    return batch * horizon / wall, actions, start


def bench_physics(
    task: TaskSpec, actions: np.ndarray, start: np.ndarray
) -> tuple[float, int, float]:
    """P: ``actions`` replayed open loop by one ``mujoco.rollout`` call each, on a pool of
    1..cores threads; the best rate (env steps/s), its thread count, and the least CPU
    seconds per env step of any thread count (this process's CPU time, every thread)."""
    env = gym.make(task.env.gym_id).unwrapped
    model, frame_skip = env.model, env.frame_skip
    batch, horizon, _ = actions.shape
    control = np.ascontiguousarray(np.repeat(actions, frame_skip, axis=1))
    nstate = start.shape[1]
    out = np.empty((batch, horizon * frame_skip, nstate))
    sensors = np.empty((batch, horizon * frame_skip, model.nsensordata))
    warmstart = np.zeros((batch, model.nv))
    best = (0.0, 1)
    cpu_per_step = math.inf
    for nthread in range(1, (os.cpu_count() or 1) + 1):
        datas = [mujoco.MjData(model) for _ in range(nthread)]
        with rollout.Rollout(nthread=nthread) as runner:
            runner.rollout(model, datas, start, control, initial_warmstart=warmstart)  # warm-up
            t0, cpu0 = time.perf_counter(), time.process_time()
            runner.rollout(
                model,
                datas,
                start,
                control,
                initial_warmstart=warmstart,
                state=out,
                sensordata=sensors,
            )
            rate = batch * horizon / (time.perf_counter() - t0)
            cpu_per_step = min(cpu_per_step, (time.process_time() - cpu0) / (batch * horizon))
        best = max(best, (rate, nthread))
    env.close()
    return best[0], best[1], cpu_per_step


def _policy_worker(args: tuple[str, int, float]) -> tuple[float, float]:
    """One core's policy rate (rows/s) on batches of ``rows`` for ``seconds``, and its
    CPU seconds per row."""
    task_id, rows, seconds = args
    task = default_registry().get(task_id)
    weights, _ = load_policy(task)
    assert task.policy is not None
    env = gym.make(task.env.gym_id)
    policy = MLPPolicy(task.policy, weights, env.action_space.high)
    obs = np.random.default_rng(0).standard_normal((rows, env.observation_space.shape[0]))
    env.close()
    policy(obs)
    done, t0, cpu0 = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - t0) < seconds:
        policy(obs)
        done += rows
    return done / elapsed, (time.process_time() - cpu0) / done


def bench_policy(task: TaskSpec, rows: int, seconds: float = 1.0) -> tuple[float, float]:
    """Q: the task's MLP on ``rows``-row batches, one process per core, rates summed; and
    its CPU seconds per row (the processes' mean)."""
    cores = os.cpu_count() or 1
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(cores) as pool:
        got = pool.map(_policy_worker, [(task.id, rows, seconds)] * cores)
    return float(sum(rate for rate, _ in got)), statistics.mean(cpu for _, cpu in got)


def mujoco_batch_tasks() -> list[TaskSpec]:
    """Every registered batch task whose env is a Gymnasium MuJoCo family, in its current
    version (a superseded one is kept to re-run old results, not to be measured)."""
    reg = default_registry()
    return [
        t
        for t in (reg.get(i) for i in reg.ids())
        if t.mode.value == "batch"
        and t.env.gym_id in FAMILIES
        and t.policy is not None
        and reg.superseded_by(t.id) is None
    ]


def measure(task: TaskSpec, args: argparse.Namespace) -> dict[str, Any]:
    """Every rate for one task, ``args.rounds`` times in a rotated order; medians + spread."""
    weights, source = load_policy(task)
    per_shard = math.ceil(args.episodes / args.workers)
    rounds: list[dict[str, float]] = []
    steps = 0
    for r in range(args.rounds):
        got: dict[str, float] = {}
        jobs = ["evaluator", "physics", "policy"]
        for job in jobs[r % 3 :] + jobs[: r % 3]:
            if job == "evaluator":
                got["evaluator"], steps, got["evaluator_cpu"] = bench_evaluator(
                    task, weights, args.episodes, args.workers
                )
            elif job == "physics":
                horizon = task.env.max_episode_steps
                got["rollout"], actions, start = bench_rollout(
                    task, weights, args.episodes, horizon, args.workers
                )
                got["physics"], got["physics_nthread"], got["physics_cpu"] = bench_physics(
                    task, actions, start
                )
            else:
                got["policy"], got["policy_cpu"] = bench_policy(task, per_shard)
        got["limit"] = 1.0 / (1.0 / got["physics"] + 1.0 / got["policy"])
        got["evaluator_over_limit"] = got["evaluator"] / got["limit"]
        # the same from CPU time: physics and policy per step over what the pipeline spent
        got["evaluator_over_limit_cpu"] = (got["physics_cpu"] + got["policy_cpu"]) / got[
            "evaluator_cpu"
        ]
        rounds.append(got)
    naive = bench_naive(task, weights, min_steps=min(steps, 20_000))

    def med(key: str) -> float:
        return statistics.median(g[key] for g in rounds)

    ratios = [g["evaluator_over_limit"] for g in rounds]
    cpu_ratios = [g["evaluator_over_limit_cpu"] for g in rounds]
    return {
        "task": task.id,
        "gym_id": task.env.gym_id,
        "rollout_kind": task.eval.rollout,
        "policy": source,
        "episodes": args.episodes,
        "workers": args.workers,
        "envs_per_shard": per_shard,
        "cores": os.cpu_count(),
        "rounds": args.rounds,
        "env_steps": steps,
        "evaluator_steps_per_s": med("evaluator"),
        "naive_steps_per_s": naive,
        "rollout_steps_per_s": med("rollout"),
        "physics_steps_per_s": med("physics"),
        "physics_nthread": int(med("physics_nthread")),
        "policy_steps_per_s": med("policy"),
        "limit_steps_per_s": med("limit"),
        "evaluator_over_limit": statistics.median(ratios),
        "evaluator_over_limit_per_round": ratios,
        "evaluator_cpu_us_per_step": med("evaluator_cpu") * 1e6,
        "physics_cpu_us_per_step": med("physics_cpu") * 1e6,
        "policy_cpu_us_per_step": med("policy_cpu") * 1e6,
        "evaluator_over_limit_cpu": statistics.median(cpu_ratios),
        "evaluator_over_limit_cpu_per_round": cpu_ratios,
        "evaluator_vs_rollout": med("evaluator") / med("rollout"),
        "evaluator_vs_naive": med("evaluator") / naive,
    }


def print_task(doc: dict[str, Any]) -> None:
    print(
        f"task {doc['task']} ({doc['gym_id']}, kind {doc['rollout_kind']}), policy: {doc['policy']}"
    )
    print(
        f"  {doc['episodes']} episodes, {doc['env_steps']} env steps, {doc['workers']} workers, "
        f"{doc['envs_per_shard']} envs/shard, {doc['rounds']} round(s), medians"
    )
    ev = doc["evaluator_steps_per_s"]
    rows = [
        ("evaluator pipeline", ev),
        ("naive gymnasium loop", doc["naive_steps_per_s"]),
        ("mujoco.rollout ref", doc["rollout_steps_per_s"]),
        (f"physics P ({doc['physics_nthread']} thr)", doc["physics_steps_per_s"]),
        (f"policy Q ({doc['cores']} procs)", doc["policy_steps_per_s"]),
        ("limit 1/(1/P+1/Q)", doc["limit_steps_per_s"]),
    ]
    for name, rate in rows:
        print(f"  {name:22s} {rate:12,.0f} steps/s   evaluator = {ev / rate:5.2f}x this")
    per = ", ".join(f"{r:.2f}" for r in doc["evaluator_over_limit_per_round"])
    print(f"  evaluator / limit: {doc['evaluator_over_limit']:.2f} (per round: {per})")
    per = ", ".join(f"{r:.2f}" for r in doc["evaluator_over_limit_cpu_per_round"])
    print(
        f"  by CPU time: (physics {doc['physics_cpu_us_per_step']:.1f} + policy "
        f"{doc['policy_cpu_us_per_step']:.1f} us/step) / evaluator "
        f"{doc['evaluator_cpu_us_per_step']:.1f} us/step = "
        f"{doc['evaluator_over_limit_cpu']:.2f} (per round: {per})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="td3-inverted-pendulum-v2", help="a task id, or 'all'")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--rounds", type=int, default=1, help="repeat every measurement (medians)")
    ap.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="'ray': also compare the Ray executor with the local one (same run)",
    )
    ap.add_argument("--reps", type=int, default=5, help="timed runs per executor (--executor ray)")
    ap.add_argument("--json", action="store_true", help="end with one JSON line")
    args = ap.parse_args()

    tasks = mujoco_batch_tasks() if args.task == "all" else [default_registry().get(args.task)]
    docs = {}
    for task in tasks:
        doc = measure(task, args)
        print_task(doc)
        if args.executor == "ray":
            weights, _ = load_policy(task)
            doc["executors"] = cmp = compare_executors(task, weights, args.episodes, args.reps)
            print_comparison(task, args.episodes, cmp)
        docs[task.id] = doc
    if args.json:
        if args.task == "all":
            low = min(d["evaluator_over_limit"] for d in docs.values())
            low_cpu = min(d["evaluator_over_limit_cpu"] for d in docs.values())
            print(
                json.dumps(
                    {
                        "tasks": docs,
                        "min_evaluator_over_limit": low,
                        "min_evaluator_over_limit_cpu": low_cpu,
                    }
                )
            )
        else:
            print(json.dumps(next(iter(docs.values()))))


if __name__ == "__main__":
    main()
