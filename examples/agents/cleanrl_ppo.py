"""CleanRL-style continuous PPO against a remote task: one file, one batched session.

CleanRL's ``ppo_continuous_action.py`` with one change: the task is registered as a
Gymnasium id whose vector entry point is ``RemoteVectorEnv``, and the ``SyncVectorEnv``
of local envs becomes ``gym.make_vec(id, num_envs=N)``: ``N`` envs of one practice
session stepped by one call per step (not one session and one call per env, as a
``SyncVectorEnv`` of remote envs would be). Gymnasium's vector wrappers (episode
statistics, action clipping, observation and reward normalization) run on the client
exactly as CleanRL runs their single-env versions. The eval session
(hidden seeds, a fixed budget) is played at the end with the deterministic policy and
the training run's observation statistics. Copy it and change the algorithm.

Usage (under the harness)::

    ale-robotics run td3-hopper-v1 --agent "python examples/agents/cleanrl_ppo.py"

or against an evaluator you started (``ALE_ENDPOINT``, ``ALE_TOKEN``, ``ALE_TASK_ID`` set).
The default length is a demo; CleanRL's own default is ``--total-timesteps 1000000``.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.normal import Normal

from ale_robotics.client import RemoteEnv

GYM_ID = "AleTask-v1"  # no "/": scripts name files after the id

# The task as a Gymnasium id: gym.make gives one remote env, gym.make_vec one batched
# session. Under the harness ALE_TASK_ID names the run's task.
gym.register(
    GYM_ID,
    entry_point="ale_robotics.client:RemoteEnv",
    vector_entry_point="ale_robotics.client:RemoteVectorEnv",
    kwargs={"task_id": os.environ.get("ALE_TASK_ID", "td3-hopper-v1")},
)


def make_envs(num_envs: int, gamma: float) -> gym.vector.VectorEnv:
    """CleanRL's env stack, as vector wrappers over one batched remote session."""
    envs = gym.make_vec(GYM_ID, num_envs=num_envs)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs = gym.wrappers.vector.ClipAction(envs)
    envs = gym.wrappers.vector.NormalizeObservation(envs)
    envs = gym.wrappers.vector.TransformObservation(envs, lambda obs: np.clip(obs, -10, 10))
    envs = gym.wrappers.vector.NormalizeReward(envs, gamma=gamma)
    return gym.wrappers.vector.TransformReward(envs, lambda r: np.clip(r, -10, 10))


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, act_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)  # type: ignore[no-any-return]

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mean = self.actor_mean(x)
        probs = Normal(mean, torch.exp(self.actor_logstd.expand_as(mean)))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def train(args: argparse.Namespace) -> tuple[Agent, Any]:
    """CleanRL's PPO loop (GAE, clipped surrogate, value clipping, annealed lr)."""
    envs = make_envs(args.num_envs, args.gamma)
    obs_dim = envs.single_observation_space.shape[0]
    act_dim = envs.single_action_space.shape[0]
    agent = Agent(obs_dim, act_dim)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    n, t = args.num_envs, args.num_steps
    batch_size = n * t
    minibatch = batch_size // args.num_minibatches
    iterations = max(1, args.total_timesteps // batch_size)
    obs = torch.zeros((t, n, obs_dim))
    actions = torch.zeros((t, n, act_dim))
    logprobs, rewards, dones, values = (torch.zeros((t, n)) for _ in range(4))
    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs, next_done = torch.Tensor(next_obs_np), torch.zeros(n)
    start, global_step = time.time(), 0
    for iteration in range(1, iterations + 1):
        optimizer.param_groups[0]["lr"] = (
            1.0 - (iteration - 1.0) / iterations
        ) * args.learning_rate
        for step in range(t):
            global_step += n
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            next_obs_np, reward, terminations, truncations, infos = envs.step(action.numpy())
            next_done = torch.Tensor(np.logical_or(terminations, truncations).astype(np.float32))
            rewards[step] = torch.Tensor(reward)
            next_obs = torch.Tensor(next_obs_np)
            if "episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    print(f"step {global_step}: episodic return {infos['episode']['r'][i]:.1f}")
        with torch.no_grad():  # GAE
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(n)
            for k in reversed(range(t)):
                nextnonterminal = 1.0 - (next_done if k == t - 1 else dones[k + 1])
                nextvalues = next_value if k == t - 1 else values[k + 1]
                delta = rewards[k] + args.gamma * nextvalues * nextnonterminal - values[k]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[k] = lastgaelam
            returns = advantages + values
        b_obs, b_act = obs.reshape((-1, obs_dim)), actions.reshape((-1, act_dim))
        b_logp, b_adv = logprobs.reshape(-1), advantages.reshape(-1)
        b_ret, b_val = returns.reshape(-1), values.reshape(-1)
        order = np.arange(batch_size)
        for _ in range(args.update_epochs):
            np.random.shuffle(order)
            for s in range(0, batch_size, minibatch):
                mb = order[s : s + minibatch]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_act[mb])
                ratio = (newlogprob - b_logp[mb]).exp()
                adv = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                clipped = torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(-adv * ratio, -adv * clipped).mean()
                newvalue = newvalue.view(-1)
                v_clipped = b_val[mb] + torch.clamp(
                    newvalue - b_val[mb], -args.clip_coef, args.clip_coef
                )
                v_loss = (
                    0.5
                    * torch.max((newvalue - b_ret[mb]) ** 2, (v_clipped - b_ret[mb]) ** 2).mean()
                )
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        print(f"iteration {iteration}/{iterations}: {int(global_step / (time.time() - start))} SPS")
    obs_rms = _obs_rms(envs)
    envs.close()
    return agent, obs_rms


def _obs_rms(envs: gym.vector.VectorEnv) -> Any:
    """The NormalizeObservation wrapper's running statistics (the eval needs them)."""
    env: Any = envs
    while not isinstance(env, gym.wrappers.vector.NormalizeObservation):
        env = env.env
    return env.obs_rms


def evaluate(agent: Agent, obs_rms: Any) -> list[float]:
    """Play the eval session's budget with the mean action; the returns we saw (CleanRL's
    ``evaluate``; the official metric is the evaluator's own)."""
    env = RemoteEnv.from_env(kind="eval")
    returns: list[float] = []
    try:
        while not env.eval_complete:
            obs, _ = env.reset()
            done, total = False, 0.0
            while not done:
                x = np.clip((obs - obs_rms.mean) / np.sqrt(obs_rms.var + 1e-8), -10, 10)
                with torch.no_grad():
                    mean = agent.actor_mean(torch.Tensor(x[None]))[0].numpy()
                action = np.clip(mean, env.action_space.low, env.action_space.high)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += reward
                done = terminated or truncated
            returns.append(total)
            print(f"eval episode {len(returns)}: return {total:.1f}")
    finally:
        env.close()
    return returns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("ALE_SEED", 1)),
        help="Training seed (default: $ALE_SEED, which an eval set sets per repetition, else 1).",
    )
    p.add_argument("--total-timesteps", type=int, default=20_000)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=512)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=32)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--no-eval", action="store_true", help="Train only (no eval session).")
    args = p.parse_args()
    random.seed(args.seed)  # CleanRL: explicit seeding everywhere
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    agent, obs_rms = train(args)
    if not args.no_eval:
        returns = evaluate(agent, obs_rms)
        print(f"eval: mean return {np.mean(returns):.1f} over {len(returns)} episodes")


if __name__ == "__main__":
    main()
