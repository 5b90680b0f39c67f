"""Reference agent for interactive tasks: train with Stable-Baselines3 through ``RemoteEnv``,
then run the eval session.

Interactive tasks never see a submission: the agent drives episodes live over gRPC. The
evaluator simulates every step itself, so what it measures in the eval session is the official
metric. This agent

1. opens a *practice* session (``RemoteEnv.from_env()``: its own seeds, unlimited episodes) and
   trains an SB3 model on it exactly as it would on a local ``gymnasium.Env``;
2. opens the run's one *eval* session (``kind="eval"``: hidden seeds, a fixed episode budget;
   seeds passed to ``reset`` are ignored) and plays the budget with the deterministic policy;
3. closes the session; the evaluator records the result, which only the harness reads.

The default training is short (a smoke run, far from the paper's return); raise ``--timesteps``
for a real attempt. Training stops early at ``--budget-fraction`` of the task's wall-clock budget
so that the eval session always fits.

Usage (under the harness)::

    ale-robotics run td3-inverted-double-pendulum-v1 \\
        --agent "python examples/agents/sb3_interactive.py --timesteps 20000"
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from ale_robotics.client import AleClient, RemoteEnv

ALGOS: dict[str, type[BaseAlgorithm]] = {"td3": TD3, "sac": SAC, "ppo": PPO}

#: Default training length: enough to see learning start, short enough for a demo run.
DEFAULT_TIMESTEPS = 3_000


class Deadline(BaseCallback):
    """Stop training at a wall-clock deadline: an agent killed by the harness mid-eval scores 0."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def _on_step(self) -> bool:
        return time.monotonic() < self.deadline


def make_model(algo: str, env: RemoteEnv, seed: int, timesteps: int) -> BaseAlgorithm:
    """The paper's TD3 (or SAC/PPO) with SB3 defaults, sized for a short run."""
    kwargs: dict[str, Any] = {"seed": seed, "verbose": 0}
    if algo in ("td3", "sac"):
        kwargs["learning_starts"] = min(1_000, max(timesteps // 4, 100))
    if algo == "ppo":
        kwargs.update(n_steps=min(2_048, max(timesteps // 2, 64)), batch_size=64)
    return ALGOS[algo]("MlpPolicy", env, **kwargs)


def train(args: argparse.Namespace, deadline: float) -> BaseAlgorithm:
    env = RemoteEnv.from_env()  # practice session: our seeds, as many episodes as we like
    try:
        model = make_model(args.algo, env, args.seed, args.timesteps)
        if args.timesteps > 0:
            model.learn(total_timesteps=args.timesteps, callback=Deadline(deadline))
        print(f"trained {args.algo} for {model.num_timesteps} steps", flush=True)
    finally:
        env.close()
    return model


def evaluate(model: BaseAlgorithm) -> None:
    """Play the eval session's whole budget with the deterministic policy."""
    env = RemoteEnv.from_env(kind="eval")
    try:
        print(f"eval session: {env.episode_budget} episodes on hidden seeds", flush=True)
        while not env.eval_complete:
            obs, _ = env.reset()
            done, ret = False, 0.0
            while not done:
                action, _ = model.predict(obs, deterministic=True)
                obs, reward, terminated, truncated, _ = env.step(action)
                ret += reward
                done = terminated or truncated
            # Our own sum of the rewards we saw; the official metric is the evaluator's.
            print(f"episode {env.episodes_completed}: return {ret:.1f}", flush=True)
    finally:
        env.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", choices=sorted(ALGOS), default="td3")
    p.add_argument("--timesteps", type=int, default=DEFAULT_TIMESTEPS)
    p.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("ALE_SEED", 0)),
        help="Training seed (default: $ALE_SEED, which an eval set sets per repetition, else 0).",
    )
    p.add_argument(
        "--budget-fraction",
        type=float,
        default=0.7,
        help="Share of the task's wall-clock budget training may use (the rest is for eval).",
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    np.set_printoptions(precision=3)
    start = time.monotonic()
    with AleClient.from_env() as client:
        budget = client.get_spec().budget_s or 3600.0
    model = train(args, start + args.budget_fraction * budget)
    evaluate(model)


if __name__ == "__main__":
    main()
