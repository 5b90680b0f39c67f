"""Where a batched remote Step's time goes, measured piece by piece in one process.

``benchmarks/interactive.py`` measures the whole remote Step against ``SyncVectorEnv``;
this script splits the evaluator's and the SDK's share of it, without gRPC:

* ``SyncVectorEnv.step``: the in-process baseline;
* ``Session.step``: the evaluator's env loop for one session (validation, autoreset,
  bookkeeping; the per-env infos stay dicts);
* ``encode``: the servicer's ``step_response`` and its serialization (info columns,
  tensors, protobuf);
* ``decode``: the SDK parsing it back into arrays and Gymnasium's vector info layout.

The pieces run interleaved in small slices over ``--rounds`` rounds (medians of the
per-round means), on steps of real random-action episodes. What the remote Step costs on
top of ``Session.step + encode + decode`` is gRPC and the two processes' thread wake-ups
(``benchmarks/grpc_floor.py``). Figures here are with warm caches; inside the evaluator,
right after the physics, encode and decode take up to about twice as long.

Usage::

    python benchmarks/step_breakdown.py [--task ID] [--num-envs 64] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np

from ale_robotics.evaluator.server.messages import step_response
from ale_robotics.evaluator.sessions.envs import make_envs
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.infos import decode_infos
from ale_robotics.tasks import default_registry
from ale_robotics.tensors import from_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

DEFAULT_TASK = "td3-inverted-double-pendulum-v1"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default=DEFAULT_TASK)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=200, help="Steps per piece per round.")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    task = default_registry().get(args.task)
    n = args.num_envs

    def make() -> Any:
        return gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)

    vector = gym.vector.SyncVectorEnv([make] * n)
    session = Session("bench", task, SessionKind.PRACTICE, make_envs(task, n))
    space = vector.single_action_space
    rng = np.random.default_rng(0)
    actions = rng.uniform(space.low, space.high, (256, n, *space.shape)).astype(space.dtype)
    vector.reset(seed=0)
    session.reset([0])
    # Real steps, resets included (their obs all view the session's one buffer: same size).
    batches = [session.step(actions[i % 256]) for i in range(256)]
    wire = [b"" for _ in batches]

    def encode(i: int) -> None:
        wire[i % len(batches)] = step_response(batches[i % len(batches)]).SerializeToString()

    for i in range(len(batches)):
        encode(i)

    def decode(i: int) -> None:
        r = pb.StepResponse.FromString(wire[i % len(wire)])
        for t in (r.observation, r.reward, r.terminated, r.truncated):
            from_tensor(t).copy()
        decode_infos(r.info_columns, r.info_json).vector(vector._add_info)

    pieces: dict[str, Callable[[int], Any]] = {
        "sync_vector_env_step": lambda i: vector.step(actions[i % 256]),
        "session_step": lambda i: session.step(actions[i % 256]),
        "encode": encode,
        "decode": decode,
    }
    rounds: dict[str, list[float]] = {name: [] for name in pieces}
    calls = -(-args.steps // 10) * 10  # whole slices of 10
    for _ in range(args.rounds):
        spent = dict.fromkeys(pieces, 0.0)
        for start in range(0, calls, 10):  # slices of 10 calls, interleaved
            for name, fn in pieces.items():
                t0 = time.perf_counter()
                for i in range(start, start + 10):
                    fn(i)
                spent[name] += time.perf_counter() - t0
        for name in pieces:
            rounds[name].append(spent[name] / calls * 1e6)
    med = {name: statistics.median(v) for name, v in rounds.items()}
    vector.close()
    session.close("benchmark over")

    base = med["sync_vector_env_step"]
    ours = med["session_step"] + med["encode"] + med["decode"]
    print(f"task {task.id} ({task.env.gym_id}), {n} envs, medians of {args.rounds} rounds")
    for name, us in med.items():
        print(f"  {name:<22} {us:9.0f} us a Step  {us / base:5.2f} x SyncVectorEnv.step")
    print(f"  {'session+encode+decode':<22} {ours:9.0f} us a Step  {ours / base:5.2f} x")
    if args.json:
        print(json.dumps({"task_id": task.id, "num_envs": n, "median_us": med, "rounds": rounds}))


if __name__ == "__main__":
    main()
