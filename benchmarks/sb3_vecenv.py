"""SB3 throughput: one batched session (``RemoteVecEnv``) against N single-env sessions.

The same task, the same number of envs, measured side by side in alternating trials
(A then B, then B then A, ...) so both see the same machine conditions; medians of
``--rounds`` rounds, and the median of the per-round ratios:

* ``batched``: ``VecMonitor(RemoteVecEnv(num_envs=N))``: one session, one Step call
  for all N envs per step (``ale_robotics.client.sb3``);
* ``sessions``: ``VecMonitor(DummyVecEnv([RemoteEnv] * N))``: N sessions, N Step calls
  per step (what SB3's ``make_vec_env`` over a registered remote id gives);
* ``local`` (reference): ``DummyVecEnv`` over N in-process Gymnasium envs.

Two figures each: env steps per second of SB3 PPO's ``learn`` (rollouts and updates,
``n_steps`` 256 per env), and of raw ``VecEnv.step`` with random actions.

The evaluator runs as its own process (``ale-robotics evaluator serve`` on Unix sockets,
``--max-sessions`` raised so both configurations stay open), as under the harness.

Usage::

    python benchmarks/sb3_vecenv.py [--task ID] [--num-envs 8] [--rounds 5]
                                    [--learn-steps 4096] [--step-seconds 1.0] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
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
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.client.sb3 import RemoteVecEnv
from ale_robotics.errors import AleError
from ale_robotics.tasks import default_registry

DEFAULT_TASK = "td3-hopper-v1"


@contextlib.contextmanager
def evaluator(task_id: str, max_sessions: int) -> Iterator[AleClient]:
    """An evaluator process serving the task on a Unix socket, and an agent client for it."""
    with tempfile.TemporaryDirectory(prefix="ale-sb3-") as d:
        state, addr = Path(d) / "state", f"unix://{d}/agent.sock"
        cmd = [sys.executable, "-m", "ale_robotics", "evaluator", "serve", "--state-dir"]
        cmd += [str(state), "--agent-listen", addr, "--harness-listen", f"unix://{d}/h.sock"]
        cmd += ["--task", task_id, "--max-sessions", str(max_sessions)]
        # Practice outside any run: the operator's practice token (issue 26), not agent.token.
        cmd += ["--allow-practice-without-run"]
        proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"the evaluator exited with code {proc.returncode}")
                token = state / "practice.token"
                if token.exists() and Path(addr.removeprefix("unix://")).exists():
                    client = AleClient(addr, token.read_text().strip(), task_id=task_id)
                    try:
                        client.get_spec()
                        break
                    except AleError:
                        client.close()
                if time.monotonic() > deadline:
                    raise SystemExit("the evaluator did not come up within 120 s")
                time.sleep(0.2)
            yield client
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _clone(client: AleClient) -> AleClient:
    token = dict(client.metadata)["authorization"].removeprefix("Bearer ")
    return AleClient(client.endpoint, token, task_id=client.task_id)


def _learn_rate(model: PPO, steps: int) -> float:
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - t0)


def _step_rate(venv: VecEnv, seconds: float) -> float:
    rng = np.random.default_rng(0)
    space = venv.action_space
    actions = rng.uniform(space.low, space.high, (64, venv.num_envs, *space.shape))
    actions = actions.astype(space.dtype)
    done, t0 = 0, time.perf_counter()
    while True:
        for a in actions[:16]:
            venv.step(a)
            done += venv.num_envs
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return done / wall


def _alternate(fns: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each fn once per round, the order reversed every other round."""
    names = list(fns)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(fns[name]())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default=DEFAULT_TASK)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--learn-steps", type=int, default=4096, help="PPO env steps per trial.")
    p.add_argument("--step-seconds", type=float, default=1.0, help="Raw stepping per trial.")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    task = default_registry().get(args.task)
    n = args.num_envs

    def local_env() -> gym.Env[Any, Any]:
        return gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)

    with evaluator(task.id, max_sessions=n + 2) as client:
        venvs: dict[str, VecEnv] = {
            "batched": VecMonitor(RemoteVecEnv(client, num_envs=n)),
            "sessions": VecMonitor(
                DummyVecEnv([lambda: RemoteEnv(_clone(client), own_client=True)] * n)
            ),
            "local": VecMonitor(DummyVecEnv([local_env] * n)),
        }
        try:
            models = {
                name: PPO("MlpPolicy", venv, n_steps=256, batch_size=256, n_epochs=4, seed=0)
                for name, venv in venvs.items()
            }
            for model in models.values():  # warm up: first rollout, torch, the streams
                model.learn(total_timesteps=n * 256, reset_num_timesteps=False)
            learn = _alternate(
                {k: (lambda m=m: _learn_rate(m, args.learn_steps)) for k, m in models.items()},
                args.rounds,
            )
            step = _alternate(
                {k: (lambda v=v: _step_rate(v, args.step_seconds)) for k, v in venvs.items()},
                args.rounds,
            )
        finally:
            for venv in venvs.values():
                venv.close()
            client.close()

    def ratio(runs: dict[str, list[float]]) -> float:
        return statistics.median(
            a / b for a, b in zip(runs["batched"], runs["sessions"], strict=True)
        )

    med = {
        f"{what}_{name}": statistics.median(v)
        for what, runs in (("learn", learn), ("step", step))
        for name, v in runs.items()
    }
    print(
        f"task {task.id} ({task.env.gym_id}), {n} envs, evaluator in its own process, "
        f"{os.cpu_count()} CPUs, medians of {args.rounds} alternating rounds"
    )
    for what, runs, unit in (("PPO learn", learn, "steps/s"), ("VecEnv.step", step, "steps/s")):
        key = "learn" if what == "PPO learn" else "step"
        print(f"  {what}:")
        print(f"    batched (1 session, RemoteVecEnv)   {med[f'{key}_batched']:>9,.0f} {unit}")
        print(f"    N sessions (DummyVecEnv+RemoteEnv)  {med[f'{key}_sessions']:>9,.0f} {unit}")
        print(f"    local (DummyVecEnv, in-process)     {med[f'{key}_local']:>9,.0f} {unit}")
        print(f"    batched / N sessions: {ratio(runs):.2f}x (median of per-round ratios)")
    if args.json:
        out = {
            **{f"{k}_steps_per_s": v for k, v in med.items()},
            "learn_ratio": ratio(learn),
            "step_ratio": ratio(step),
            "num_envs": n,
            "task": task.id,
            "rounds": {"learn": learn, "step": step},
        }
        print(json.dumps(out))


if __name__ == "__main__":
    main()
