"""SB3 PPO over one batched session (``ale_robotics.client.sb3.RemoteVecEnv``), then the eval.

Where ``sb3_interactive.py`` trains on one env, this trains on ``--num-envs`` envs of one
practice session: SB3's ``VecEnv`` API over one Step call per step for all envs (not one
session per env, as ``make_vec_env`` over ``RemoteEnv`` would give). ``VecMonitor``
records the episode statistics SB3 logs; ``VecNormalize`` normalizes observations as
SB3's MuJoCo recipes do, and its statistics are frozen and reused for the eval session
(hidden seeds, a fixed budget), played through ``evaluate_policy`` on a one-env
``RemoteVecEnv`` of kind "eval". Copy it and change the algorithm or its settings.

Usage (under the harness)::

    ale-robotics run td3-hopper-v1 --agent "python examples/agents/sb3_vecenv.py"

or against an evaluator you started (``ALE_ENDPOINT``, ``ALE_TOKEN``, ``ALE_TASK_ID`` set).
Needs the ``sb3`` extra (``pip install 'ale-robotics[sb3]'``). The default length is a
demo; raise ``--timesteps`` for a real attempt.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

from ale_robotics.client.sb3 import RemoteVecEnv


def train(args: argparse.Namespace) -> tuple[PPO, VecNormalize]:
    venv = VecNormalize(VecMonitor(RemoteVecEnv.from_env(num_envs=args.num_envs)))
    venv.seed(args.seed)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        seed=args.seed,
        verbose=1,
    )
    model.learn(total_timesteps=args.timesteps)
    venv.close()  # the statistics stay in the wrapper; its session closes
    return model, venv


def evaluate(model: PPO, stats: VecNormalize) -> tuple[float, float]:
    """The eval session's whole budget with the deterministic policy and frozen statistics.
    The returns printed are ours; the official metric is the evaluator's."""
    eval_env = VecNormalize(VecMonitor(RemoteVecEnv.from_env(kind="eval")), training=False)
    eval_env.obs_rms, eval_env.norm_reward = stats.obs_rms, False
    budget = eval_env.get_attr("max_episode_steps")[0]
    try:
        episodes = eval_env.unwrapped.episode_budget
        print(f"eval session: {episodes} episodes on hidden seeds (<= {budget} steps each)")
        mean, std = evaluate_policy(model, eval_env, n_eval_episodes=episodes, warn=False)
    finally:
        eval_env.close()
    return mean, std


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--timesteps", type=int, default=20_000)
    p.add_argument("--n-steps", type=int, default=256, help="Rollout length per env.")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("ALE_SEED", 0)),
        help="Training seed (default: $ALE_SEED, which an eval set sets per repetition, else 0).",
    )
    p.add_argument("--no-eval", action="store_true", help="Train only (no eval session).")
    args = p.parse_args()
    torch.set_num_threads(1)
    np.set_printoptions(precision=3)
    model, stats = train(args)
    if not args.no_eval:
        mean, std = evaluate(model, stats)
        print(f"eval: mean return {mean:.1f} +/- {std:.1f}")


if __name__ == "__main__":
    main()
