"""MJX rollout kind vs the C kind: steps/s of N parallel HalfCheetah episodes, on one machine.

One prepared run (a few minutes on a GPU): for each batch size N (default 1024, 4096,
16384) it rolls out N HalfCheetah-v5 episodes of ``--horizon`` control steps (default
100) with the contract's TD3 MLP (400-300, random weights), twice through each kind's
``run_shard`` (what an evaluation worker calls, resets included):

* ``mjx``: one jitted, vmapped JAX program on JAX's default device (the GPU where there
  is one); the first call compiles it (reported as ``compile_s``), the timed calls reuse it;
* ``mujoco_rollout`` (the C kind): ``mujoco.rollout`` on every CPU core of the same
  machine (``eval.threads`` = the core count, at most 64), the policy batched in numpy.

Rate = N x horizon / wall seconds of the best timed call (``--reps``, default 2). It
prints a table and, last, one JSON line naming the device (``jax.devices()``), the
CPU, the versions and the rows. The mean returns are printed as a sanity check only:
float32 MJX and float64 C episodes drift apart on a chaotic random gait (see
``tests/rollouts/mjx``), so they agree statistically, not per episode.

On a CPU-only host (no GPU) MJX runs on the CPU; small sizes make it quick::

    python benchmarks/mjx_gpu.py                          # 1k, 4k, 16k x 100 steps
    python benchmarks/mjx_gpu.py --sizes 16,64 --horizon 20 --reps 1 --json

Needs the ``mjx`` extra (``pip install -e '.[mjx]'``, plus ``jax[cuda12]`` of the same
version on an NVIDIA GPU). Timings on a shared machine are noisy: say how quiet it was.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from importlib import metadata
from typing import Any

import numpy as np

from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.mjx.kind import configure_xla
from ale_robotics.tasks import TaskSpec, default_registry

TASK_ID = "td3-halfcheetah-vec-v1"


def _task(backend: str, horizon: int, episodes: int, threads: int) -> TaskSpec:
    """The bundled HalfCheetah task on ``backend``, ``horizon`` steps, one shard of all."""
    base = default_registry().get(TASK_ID)
    env = base.env.model_copy(update={"max_episode_steps": horizon})
    ev = base.eval.model_copy(
        update={"rollout": backend, "threads": threads, "envs_per_shard": episodes}
    )
    return base.model_copy(update={"env": env, "eval": ev})


def _weights(task: TaskSpec, seed: int = 0) -> dict[str, np.ndarray]:
    assert task.contract is not None
    rng = np.random.default_rng(seed)
    return {
        t.key: (rng.standard_normal(t.shape) * 0.1).astype(np.float32)
        for t in task.contract.tensors
    }


def _time_kind(
    backend: str, n: int, horizon: int, threads: int, reps: int
) -> tuple[float, list[float], float]:
    """(first-call seconds, timed-call seconds, mean return) of ``n`` episodes on ``backend``."""
    task = _task(backend, horizon, n, threads)
    weights = _weights(task)
    seeds = [(i, 10_000 + i) for i in range(n)]
    kind = get_kind(backend)
    t0 = time.perf_counter()
    kind.run_shard(task, weights, seeds)  # mjx: compiles for this batch size
    first = time.perf_counter() - t0
    times = []
    out: list[Any] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = kind.run_shard(task, weights, seeds)
        times.append(time.perf_counter() - t0)
    assert len(out) == n and all(o.length == horizon for o in out)
    return first, times, statistics.fmean(o.ret for o in out)


def _reset_seconds(n: int) -> float:
    """Wall seconds of the ``n`` Gymnasium resets both kinds start a shard with (the exact
    reset noise comes from ``env.reset(seed=...)``, one env at a time, on one core)."""
    from ale_robotics.envs.make import make_env

    env: Any = make_env(_task("mujoco_rollout", 1, 1, 1).env, time_limit=False).unwrapped
    t0 = time.perf_counter()
    for i in range(n):
        env.reset(seed=10_000 + i)
    seconds = time.perf_counter() - t0
    env.close()
    return seconds


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1024,4096,16384", help="episodes per batch, comma-separated"
    )
    parser.add_argument("--horizon", type=int, default=100, help="control steps per episode")
    parser.add_argument("--reps", type=int, default=2, help="timed calls per kind and size")
    parser.add_argument(
        "--threads", type=int, default=0, help="C kind threads (0: all cores, <= 64)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line last")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    threads = args.threads or min(64, os.cpu_count() or 1)

    configure_xla()  # the kind's XLA defaults, before JAX starts (as in a worker)
    import jax

    from ale_robotics.rollouts.mjx.rollout import device_name

    device = device_name()
    rows = []
    for n in sizes:
        steps = n * args.horizon
        m_first, m_times, m_ret = _time_kind("mjx", n, args.horizon, threads, args.reps)
        _, c_times, c_ret = _time_kind("mujoco_rollout", n, args.horizon, threads, args.reps)
        resets = _reset_seconds(n)
        row = {
            "episodes": n,
            "mjx_steps_per_s": steps / min(m_times),
            "mjx_compile_s": m_first - min(m_times),
            "mjx_mean_return": m_ret,
            "c_steps_per_s": steps / min(c_times),
            "c_mean_return": c_ret,
            "reset_s": resets,
            # the rollouts alone: the shard's time less its resets (the same work for both)
            "mjx_rollout_steps_per_s": steps / max(1e-9, min(m_times) - resets),
            "c_rollout_steps_per_s": steps / max(1e-9, min(c_times) - resets),
        }
        row["mjx_over_c"] = row["mjx_steps_per_s"] / row["c_steps_per_s"]
        row["mjx_over_c_rollout"] = row["mjx_rollout_steps_per_s"] / row["c_rollout_steps_per_s"]
        rows.append(row)
        print(
            f"  N={n}: mjx {row['mjx_steps_per_s']:,.0f} steps/s "
            f"(compile {row['mjx_compile_s']:.1f} s), C {row['c_steps_per_s']:,.0f} steps/s",
            file=sys.stderr,
            flush=True,
        )

    print(f"HalfCheetah-v5, {args.horizon}-step episodes, TD3 MLP 400-300, best of {args.reps}")
    print(f"mjx: {device} (jax {jax.__version__});  C kind: {threads} threads on {_cpu_name()}")
    print("steps/s of a whole shard (resets included); in brackets without the resets")
    header = (
        f"{'episodes':>9} {'mjx steps/s':>24} {'C steps/s':>24} {'mjx/C':>12} "
        f"{'resets s':>9} {'compile s':>10} {'mean ret mjx / C':>20}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        mjx = f"{r['mjx_steps_per_s']:,.0f} [{r['mjx_rollout_steps_per_s']:,.0f}]"
        c = f"{r['c_steps_per_s']:,.0f} [{r['c_rollout_steps_per_s']:,.0f}]"
        ratio = f"{r['mjx_over_c']:.2f} [{r['mjx_over_c_rollout']:.2f}]"
        print(
            f"{r['episodes']:>9} {mjx:>24} {c:>24} {ratio:>12} {r['reset_s']:>9.2f} "
            f"{r['mjx_compile_s']:>10.1f} {r['mjx_mean_return']:>9.2f} / {r['c_mean_return']:<9.2f}"
        )
    if args.json:
        print(
            json.dumps(
                {
                    "benchmark": "mjx_gpu",
                    "device": device,
                    "jax_devices": [str(d) for d in jax.devices()],
                    "cpu": _cpu_name(),
                    "cpu_count": os.cpu_count(),
                    "c_threads": threads,
                    "horizon": args.horizon,
                    "reps": args.reps,
                    "versions": {
                        d: metadata.version(d) for d in ("jax", "jaxlib", "mujoco", "mujoco-mjx")
                    },
                    "rows": rows,
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
