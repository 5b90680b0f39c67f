"""Interactive-mode throughput: what gym-over-gRPC costs against stepping the env in-process.

Four measurements of the same task, same random actions, in one run:

* ``raw``: one Gymnasium env in this process (``gym.make`` with the task's step limit);
* ``raw_vector``: ``gymnasium.vector.SyncVectorEnv`` with ``--num-envs`` envs in this process;
* ``unary``: ``RemoteEnv`` (one env): one Step RPC per env step;
* ``batched``: ``RemoteVectorEnv`` with ``--num-envs`` envs: one Step RPC for all of them.

The evaluator runs as its own process (``ale-robotics evaluator serve``, Unix sockets), as it
does under the harness, so client and server do not share a GIL; ``--in-process`` starts it in
this process instead. The target is ``batched >= 0.7 x raw_vector``: a batched session should
cost little more than the vector env the agent would otherwise step locally.

Usage::

    python benchmarks/interactive.py [--task ID] [--num-envs 64] [--seconds 3] [--json]

With ``--json`` the last line is one JSON object with the keys ``raw_steps_per_s``,
``raw_vector_steps_per_s``, ``unary_steps_per_s``, ``batched64_steps_per_s`` (the last named
after 64 envs whatever ``--num-envs`` is, plus ``num_envs`` and the ratios).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
from ale_robotics.errors import AleError
from ale_robotics.tasks import TaskSpec, default_registry

DEFAULT_TASK = "td3-inverted-double-pendulum-v1"


def _actions(space: Any, n: int, seed: int = 0) -> np.ndarray:
    """Pre-drawn uniform actions, so no measurement pays for the RNG."""
    rng = np.random.default_rng(seed)
    return rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)


def _timed(step: Callable[[int], int], seconds: float, warmup: int = 20) -> float:
    """Env steps per second of ``step(i) -> env steps done``, run for about ``seconds``."""
    for i in range(warmup):
        step(i)
    done, i = 0, warmup
    t0 = time.perf_counter()
    while True:
        for _ in range(50):
            done += step(i)
            i += 1
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return done / wall


def bench_raw(task: TaskSpec, seconds: float) -> float:
    env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    acts = _actions(env.action_space, 4096)
    env.reset(seed=0)

    def step(i: int) -> int:
        _, _, term, trunc, _ = env.step(acts[i % len(acts)])
        if term or trunc:
            env.reset()
        return 1

    return _timed(step, seconds)


def bench_raw_vector(task: TaskSpec, n: int, seconds: float) -> float:
    env = gym.vector.SyncVectorEnv(
        [lambda: gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)] * n
    )
    acts = _actions(env.single_action_space, 256 * n).reshape(256, n, -1)
    env.reset(seed=0)

    def step(i: int) -> int:
        env.step(acts[i % len(acts)])
        return n

    try:
        return _timed(step, seconds)
    finally:
        env.close()


def bench_unary(client: AleClient, seconds: float) -> float:
    env = RemoteEnv(client)
    acts = _actions(env.action_space, 4096)
    env.reset(seed=0)

    def step(i: int) -> int:
        _, _, term, trunc, _ = env.step(acts[i % len(acts)])
        if term or trunc:
            env.reset()
        return 1

    try:
        return _timed(step, seconds)
    finally:
        env.close()


def bench_batched(client: AleClient, n: int, seconds: float) -> float:
    env = RemoteVectorEnv(client, num_envs=n)
    acts = _actions(env.single_action_space, 256 * n).reshape(256, n, -1)
    env.reset(seed=0)

    def step(i: int) -> int:
        env.step(acts[i % len(acts)])
        return n

    try:
        return _timed(step, seconds)
    finally:
        env.close()


@contextlib.contextmanager
def evaluator(task_id: str, in_process: bool) -> Iterator[AleClient]:
    """An evaluator serving the task on a Unix socket, and an agent client for it."""
    with tempfile.TemporaryDirectory(prefix="ale-bench-") as d:
        state, addr = Path(d) / "state", f"unix://{d}/agent.sock"
        if in_process:
            from ale_robotics.evaluator import EvaluatorConfig, serve

            running = serve(
                EvaluatorConfig(state, None, task_id=task_id, workers=1),
                agent_listen=addr,
                harness_listen=f"unix://{d}/harness.sock",
            )
            try:
                yield AleClient(running.agent_address, running.agent_token, task_id=task_id)
            finally:
                running.stop()
            return
        cmd = [sys.executable, "-m", "ale_robotics", "evaluator", "serve", "--state-dir"]
        cmd += [str(state), "--agent-listen", addr, "--harness-listen", f"unix://{d}/h.sock"]
        proc = subprocess.Popen([*cmd, "--task", task_id], stderr=subprocess.DEVNULL)
        try:
            yield _connect(state / "agent.token", addr, task_id, proc)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _connect(token: Path, addr: str, task_id: str, proc: subprocess.Popen[bytes]) -> AleClient:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the evaluator exited with code {proc.returncode}")
        if token.exists() and Path(addr.removeprefix("unix://")).exists():
            client = AleClient(addr, token.read_text().strip(), task_id=task_id)
            try:
                client.get_spec()
                return client
            except AleError:
                client.close()
        time.sleep(0.2)
    raise SystemExit("the evaluator did not come up within 120 s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default=DEFAULT_TASK)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--seconds", type=float, default=3.0, help="Per measurement.")
    p.add_argument("--in-process", action="store_true", help="Evaluator in this process.")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    task = default_registry().get(args.task)
    n = args.num_envs
    raw = bench_raw(task, args.seconds)
    raw_vec = bench_raw_vector(task, n, args.seconds)
    with evaluator(task.id, args.in_process) as client:
        unary = bench_unary(client, args.seconds)
        batched = bench_batched(client, n, args.seconds)
        client.close()
    rows = [
        ("raw env (in-process, 1 env)", raw, ""),
        (f"raw vector env (SyncVectorEnv, {n} envs)", raw_vec, ""),
        ("unary Step over gRPC (1 env)", unary, f"{unary / raw:.2f} x raw env"),
        (f"batched Step over gRPC ({n} envs)", batched, f"{batched / raw_vec:.2f} x raw vector"),
    ]
    where = "this process" if args.in_process else "its own process"
    print(f"task {task.id} ({task.env.gym_id}), evaluator in {where}, {os.cpu_count()} CPUs")
    for name, value, ratio in rows:
        print(f"  {name:<42} {value:>10,.0f} steps/s  {ratio}")
    print(f"  target: batched >= 0.70 x raw vector -> {batched / raw_vec:.2f}")
    if args.json:
        print(
            json.dumps(
                {
                    "task_id": task.id,
                    "num_envs": n,
                    "raw_steps_per_s": raw,
                    "raw_vector_steps_per_s": raw_vec,
                    "unary_steps_per_s": unary,
                    "batched64_steps_per_s": batched,
                    "unary_vs_raw": unary / raw,
                    "batched_vs_raw_vector": batched / raw_vec,
                }
            )
        )


if __name__ == "__main__":
    main()
