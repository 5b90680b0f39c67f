"""The MuJoCo Warp kind against the C kind and MJX: steps/s, first call, memory, per size.

For each batch size N (default 1, 64, 1024) and each kind, N HalfCheetah-v5 episodes of
``--horizon`` control steps (default 50) with the contract's TD3 MLP (400-300, random
weights), through what an evaluation runs:

* ``mujoco_warp``: the local executor's worker in the ``mujoco-warp`` engine environment
  (``make engines``), on the device its probe picks (Warp's CUDA device where there is
  one, else its CPU), one shard of N worlds;
* ``mujoco_rollout`` (the C kind), in this process: ``mujoco.rollout`` on one thread, and
  on every core;
* ``mjx``, in this process, when the ``mjx`` extra is installed (JAX's default device).

Each (kind, N) runs in a fresh child process: its first call (worker start or JIT, and a
Warp kernel compile when its cache is cold), then ``--reps`` timed calls; rate = N x
horizon / the best timed call; memory = the peak resident set of the process that
simulated (the engine's worker for Warp). ``--cold-warp`` first measures Warp's kernel
compile for the model from an empty cache (minutes on a CPU). It prints a table and, last,
one JSON line (the device, the CPU, the load before and after, the versions, the rows).

    python benchmarks/engines_warp.py                      # 1, 64, 1024 x 50 steps
    python benchmarks/engines_warp.py --sizes 1,64 --horizon 20 --reps 1 --json
    python benchmarks/engines_warp.py --sizes 1024,4096,16384 --cold-warp   # on a GPU host

Timings on a shared machine are noisy: the load averages are printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

import numpy as np

TASK_ID = "td3-halfcheetah-vec-v1"
KINDS = ("mujoco_warp", "mujoco_rollout-1", "mujoco_rollout-all", "mjx")


def _task(kind: str, n: int, horizon: int) -> Any:
    """The bundled HalfCheetah task on ``kind``, ``horizon`` steps, one shard of ``n``."""
    from ale_robotics.tasks import TaskSpec, default_registry

    doc = json.loads(default_registry().entry(TASK_ID).raw)
    doc["env"]["max_episode_steps"] = horizon
    doc["eval"]["envs_per_shard"] = n
    backend, _, threads = kind.partition("-")
    doc["eval"]["backend"] = backend
    if backend == "mujoco_rollout":
        doc["eval"]["threads"] = 1 if threads == "1" else min(64, os.cpu_count() or 1)
    else:
        doc["eval"].pop("threads", None)
    return TaskSpec.model_validate(doc)


def _weights(task: Any) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        t.key: (rng.standard_normal(t.shape) * 0.1).astype(np.float32)
        for t in task.contract.tensors
    }


def _one(kind: str, n: int, horizon: int, reps: int, cold_cache: str | None) -> dict[str, Any]:
    """One (kind, N) in this process (the child): first call, timed calls, memory."""
    task = _task(kind, n, horizon)
    weights = _weights(task)
    seeds = [(i, 10_000 + i) for i in range(n)]
    row: dict[str, Any] = {"kind": kind, "n": n, "horizon": horizon}
    if kind == "mujoco_warp":
        from ale_robotics.engines import engine_used
        from ale_robotics.evaluator.execution import LocalExecutor

        if cold_cache is not None:
            from ale_robotics.rollouts.mujoco_warp.engine import MujocoWarpEngine

            MujocoWarpEngine.worker_env = lambda self, home: {  # type: ignore[method-assign]
                "WARP_CACHE_PATH": cold_cache,
                "MUJOCO_GL": "disable",
            }
        pool = LocalExecutor(workers=1)
        try:

            def call() -> list[Any]:
                out: list[Any] = pool.run(task, weights, [s for _, s in seeds])
                return out

            t0 = time.perf_counter()
            call()
            row["first_s"] = time.perf_counter() - t0
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                out = call()
                times.append(time.perf_counter() - t0)
            usage = pool.run_in_worker(resource.getrusage, resource.RUSAGE_SELF, task=task)
            row["peak_rss_mb"] = usage.ru_maxrss / 1024
            used = engine_used(task)
            row["device"] = used.device if used is not None else ""
        finally:
            pool.shutdown()
    else:
        from ale_robotics.model.kind_registry import get_kind

        if kind == "mjx":
            from ale_robotics.rollouts.mjx.kind import configure_xla

            configure_xla()
        k = get_kind(task.eval.rollout)
        t0 = time.perf_counter()
        k.run_shard(task, weights, seeds)
        row["first_s"] = time.perf_counter() - t0
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out = k.run_shard(task, weights, seeds)
            times.append(time.perf_counter() - t0)
        row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if kind == "mjx":
            from ale_robotics.rollouts.mjx.rollout import device_name

            row["device"] = device_name()
        else:
            row["device"] = f"cpu, {task.eval.threads} thread(s)"
    assert len(out) == n
    row["best_s"] = min(times)
    row["steps_per_s"] = sum(o.length for o in out) / min(times)  # env steps, all episodes
    row["mean_return"] = float(np.mean([o.ret for o in out]))
    return row


def _child(kind: str, n: int, args: argparse.Namespace, cold: str | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", kind, "--sizes", str(n)]
    cmd += ["--horizon", str(args.horizon), "--reps", str(args.reps)]
    if cold is not None:
        cmd += ["--cold-cache", cold]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"kind": kind, "n": n, "skipped": why[:200]}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def _available(kind: str) -> str | None:
    """Why ``kind`` cannot be measured here, or None."""
    if kind == "mjx":
        import importlib.util

        if importlib.util.find_spec("jax") is None:
            return "the mjx extra is not installed (pip install -e '.[mjx]')"
    if kind == "mujoco_warp":
        from ale_robotics.engines import get_engine, installed

        if installed(get_engine("mujoco-warp")) is None:
            return "the mujoco-warp engine is not built (make engines)"
    return None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,64,1024", help="episodes per batch, comma-separated")
    parser.add_argument("--horizon", type=int, default=50, help="control steps per episode")
    parser.add_argument("--reps", type=int, default=2, help="timed calls per kind and size")
    parser.add_argument("--kinds", default=",".join(KINDS), help="kinds to measure")
    parser.add_argument("--cold-warp", action="store_true", help="Warp's compile, cold cache")
    parser.add_argument("--json", action="store_true", help="print one JSON line last")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--cold-cache", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.one:
        print(json.dumps(_one(args.one, sizes[0], args.horizon, args.reps, args.cold_cache)))
        return 0
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    compile_row = None
    if args.cold_warp and _available("mujoco_warp") is None:
        with tempfile.TemporaryDirectory(prefix="warp-cold-") as cold:
            compile_row = _child("mujoco_warp", 1, argparse.Namespace(horizon=2, reps=1), cold)
    for kind in args.kinds.split(","):
        why = _available(kind)
        for n in sizes:
            rows.append({"kind": kind, "n": n, "skipped": why} if why else _child(kind, n, args))
    load_after = os.getloadavg()
    print(f"HalfCheetah-v5, {args.horizon} control steps, TD3 MLP 400-300; best of {args.reps}")
    print(f"{'kind':<20} {'N':>5} {'steps/s':>10} {'first call':>11} {'peak RSS':>9}  device")
    for r in rows:
        if "skipped" in r:
            print(f"{r['kind']:<20} {r['n']:>5}  skipped: {r['skipped']}")
            continue
        print(
            f"{r['kind']:<20} {r['n']:>5} {r['steps_per_s']:>10.0f} {r['first_s']:>10.1f}s "
            f"{r['peak_rss_mb']:>7.0f}MB  {r['device']}"
        )
    if compile_row is not None and "first_s" in compile_row:
        cold_s = compile_row["first_s"]
        print(f"Warp kernel compile, cold cache (first call, 1 world): {cold_s:.0f} s")
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    if args.json:
        doc = {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load": [round(load_before[0], 2), round(load_after[0], 2)],
            "versions": {d: _version(d) for d in ("mujoco", "ale-robotics", "jax", "numpy")},
            "cold_warp_compile_s": None if compile_row is None else compile_row.get("first_s"),
            "rows": rows,
        }
        print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
