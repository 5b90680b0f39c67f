"""One-env training loops end to end: steps/s of a real agent on a local Gymnasium env against
the same agent on a co-located evaluator, through shared memory and through gRPC (issue 47).

A single-env agent steps its env once per training step, so what an env step costs beyond
Gymnasium's own shows up as a share of the whole loop. Two loops, each run on three envs of the
same task in this process:

* ``td3``: the TD3 authors' ``main.py`` training loop and ``TD3.py`` (Fujimoto et al., 2018,
  "Addressing Function Approximation Error in Actor-Critic Methods"; the reference code's
  hyper-parameters: 256-256 actor and twin critics, Adam 3e-4, batch 256, discount 0.99,
  tau 0.005, target policy noise 0.2 clipped at 0.5, a delayed actor update every 2 critic
  updates, Gaussian exploration noise 0.1, a 1M-transition replay buffer), re-implemented
  here in PyTorch on the CPU from the paper and the published code's structure (no code
  vendored): one env step, one replay-buffer add and one TD3 update per step after the random
  start. The periodic evaluation episodes (``eval_freq``) are left out: they are another env.
* ``ppo``: Stable-Baselines3's ``PPO("MlpPolicy", env)`` with its defaults (``n_envs=1``:
  SB3 wraps the env in a ``DummyVecEnv``; 2048-step rollouts, 10 epochs of 64-sample batches):
  every slice is one ``learn`` call of one rollout and its update.

The envs (``--side``): ``local`` is ``gym.make`` of the task's env with its step limit in this
process; ``shm`` a ``RemoteEnv`` on a practice session of an evaluator in its own process
(``ale-robotics evaluator serve`` on a Unix socket, as under the harness) stepping through the
shared-memory data plane; ``stream`` the same over gRPC's ``StepStream``. Each side keeps its
own agent (same seed) and env for the whole run; after a warm-up (the random start, the first
PPO rollout), every round runs one slice of each side (TD3: ``--td3-steps`` training steps;
PPO: one rollout and its update), in the order local, shm, stream, then reversed in the next
round (a slice is a number of steps, not of seconds: on a starved host a time slice holds too
few steps to measure), so that the host's drift hits every side alike. Reported per side:
steps/s (median over the rounds, min-max), the ratio to ``local`` (median of the per-round
ratios), the wall time spent inside ``env.step``/``reset`` per step (the env's share of the
loop), and CPU per step from ``/proc``: this process (the agent) and the evaluator's, and
their sum over the local side's (``cpu_vs_local``). A one-env loop is serial (the agent
waits while the env steps), so on a quiet host the sum is close to the wall time of a
step; on a loaded one the wall time also holds every wake-up's wait for a core, and the
CPU ratio is the steadier figure. The evaluator's CPU includes its idle threads' (the
local side's evaluator figure is that alone).

Usage::

    python benchmarks/one_env_training.py [--task ID] [--algo td3|ppo ...] [--rounds 5]
                                          [--td3-steps 250] [--torch-threads 1] [--json]

PyTorch gets ``--torch-threads`` threads (1 by default: the evaluator and the agent alternate
on two cores; the same on every side). ``--quick`` is a smoke run (small buffer, short slices,
PPO rollouts of 256 steps). With ``--json`` the last line is one JSON object:
``{"task", "rows": [{"algo", "side", "steps_per_s", "steps_per_s_min", "steps_per_s_max",
"vs_local", "vs_local_per_round", "env_ms_per_step", "env_share", "agent_cpu_us_per_step",
"evaluator_cpu_us_per_step", "cpu_vs_local", "steps"}], "loadavg": [...], "machine": {...}}``
(``loadavg``: the 1-minute load average before every round and after the last).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.tasks import TaskSpec, default_registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interactive import _cpu_now, evaluator  # a sibling script: the same evaluator set-up

DEFAULT_TASK = "td3-hopper-v1"
SIDES = ("local", "shm", "stream")


# --- TD3 (Fujimoto et al., 2018), as the authors' TD3.py / utils.py / main.py structure it ---


class Actor(nn.Module):
    def __init__(self, state_dim: int, action_dim: int, max_action: float) -> None:
        super().__init__()
        self.l1 = nn.Linear(state_dim, 256)
        self.l2 = nn.Linear(256, 256)
        self.l3 = nn.Linear(256, action_dim)
        self.max_action = max_action

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return self.max_action * torch.tanh(self.l3(a))


class Critic(nn.Module):
    """The twin Q networks (clipped double Q-learning), one module as in the reference code."""

    def __init__(self, state_dim: int, action_dim: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, 256)
        self.l2 = nn.Linear(256, 256)
        self.l3 = nn.Linear(256, 1)
        self.l4 = nn.Linear(state_dim + action_dim, 256)
        self.l5 = nn.Linear(256, 256)
        self.l6 = nn.Linear(256, 1)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def q1(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


class ReplayBuffer:
    """float64 numpy arrays of ``max_size`` rows (untouched pages cost no memory)."""

    def __init__(self, state_dim: int, action_dim: int, max_size: int) -> None:
        self.max_size, self.ptr, self.size = max_size, 0, 0
        self.state = np.zeros((max_size, state_dim))
        self.action = np.zeros((max_size, action_dim))
        self.next_state = np.zeros((max_size, state_dim))
        self.reward = np.zeros((max_size, 1))
        self.not_done = np.zeros((max_size, 1))

    def add(self, s: Any, a: Any, s2: Any, r: float, done: float) -> None:
        self.state[self.ptr], self.action[self.ptr], self.next_state[self.ptr] = s, a, s2
        self.reward[self.ptr], self.not_done[self.ptr] = r, 1.0 - done
        self.ptr = (self.ptr + 1) % self.max_size
        self.size = min(self.size + 1, self.max_size)

    def sample(self, n: int) -> tuple[torch.Tensor, ...]:
        ind = np.random.randint(0, self.size, size=n)
        return tuple(
            torch.FloatTensor(x[ind])
            for x in (self.state, self.action, self.next_state, self.reward, self.not_done)
        )


class TD3:
    def __init__(self, state_dim: int, action_dim: int, max_action: float) -> None:
        self.actor = Actor(state_dim, action_dim, max_action)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic = Critic(state_dim, action_dim)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
        self.max_action = max_action
        self.discount, self.tau = 0.99, 0.005
        self.policy_noise, self.noise_clip, self.policy_freq = 0.2, 0.5, 2
        self.total_it = 0

    def select_action(self, state: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.actor(torch.FloatTensor(state.reshape(1, -1))).numpy().flatten()

    def train(self, buffer: ReplayBuffer, batch_size: int = 256) -> None:
        self.total_it += 1
        state, action, next_state, reward, not_done = buffer.sample(batch_size)
        with torch.no_grad():
            noise = (torch.randn_like(action) * self.policy_noise).clamp(
                -self.noise_clip, self.noise_clip
            )
            next_action = (self.actor_target(next_state) + noise).clamp(
                -self.max_action, self.max_action
            )
            target_q1, target_q2 = self.critic_target(next_state, next_action)
            target_q = reward + not_done * self.discount * torch.min(target_q1, target_q2)
        current_q1, current_q2 = self.critic(state, action)
        critic_loss = F.mse_loss(current_q1, target_q) + F.mse_loss(current_q2, target_q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        if self.total_it % self.policy_freq == 0:
            actor_loss = -self.critic.q1(state, self.actor(state)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            for net, target in ((self.critic, self.critic_target), (self.actor, self.actor_target)):
                for p, tp in zip(net.parameters(), target.parameters(), strict=True):
                    tp.data.copy_(self.tau * p.data + (1 - self.tau) * tp.data)


class TimedEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Wall time inside ``step`` and ``reset``: the env's share of the training loop."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.env_s = 0.0

    def step(self, action: Any) -> Any:
        t0 = time.perf_counter()
        out = self.env.step(action)
        self.env_s += time.perf_counter() - t0
        return out

    def reset(self, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.env_s += time.perf_counter() - t0
        return out


class TD3Loop:
    """``main.py``'s loop, resumable: ``run(seconds)`` goes on where the last call stopped."""

    def __init__(self, env: TimedEnv, seed: int, start_steps: int, buffer_size: int) -> None:
        self.env = env
        env.action_space.seed(seed)
        state_dim = int(np.prod(env.observation_space.shape))
        self.action_dim = int(np.prod(env.action_space.shape))
        self.max_action = float(env.action_space.high[0])
        self.policy = TD3(state_dim, self.action_dim, self.max_action)
        self.buffer = ReplayBuffer(state_dim, self.action_dim, buffer_size)
        self.start_steps = start_steps
        self.state, _ = env.reset(seed=seed)
        self.t = 0

    def step(self) -> None:
        if self.t < self.start_steps:
            action = self.env.action_space.sample()
        else:
            noise = np.random.normal(0, self.max_action * 0.1, size=self.action_dim)
            action = (self.policy.select_action(np.array(self.state)) + noise).clip(
                -self.max_action, self.max_action
            )
        next_state, reward, terminated, truncated, _ = self.env.step(action)
        # main.py's done_bool: a time-limit end is no terminal state.
        self.buffer.add(self.state, action, next_state, float(reward), float(terminated))
        self.state = next_state
        if self.t >= self.start_steps:
            self.policy.train(self.buffer, 256)
        if terminated or truncated:
            self.state, _ = self.env.reset()
        self.t += 1

    def warm_up(self) -> None:
        """The random start, and a few updates (allocations, first-call costs)."""
        while self.t < self.start_steps + 20:
            self.step()

    def run(self, steps: int) -> int:
        for _ in range(steps):
            self.step()
        return steps


class PPOLoop:
    """SB3's PPO with its defaults on the one env: a slice is one rollout and its update."""

    def __init__(self, env: TimedEnv, seed: int, n_steps: int) -> None:
        from stable_baselines3 import PPO

        kwargs: dict[str, Any] = {"n_steps": n_steps} if n_steps != 2048 else {}
        if n_steps < 64:
            kwargs["batch_size"] = n_steps
        self.model = PPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **kwargs)
        self.n_steps = n_steps
        self.learned = False

    def warm_up(self) -> None:
        self._learn()

    def _learn(self) -> None:
        self.model.learn(self.n_steps, reset_num_timesteps=not self.learned)
        self.learned = True

    def run(self, steps: int) -> int:
        del steps  # one rollout and its update
        self._learn()
        return self.n_steps


Loop = TD3Loop | PPOLoop


def make_env(side: str, task: TaskSpec, client: AleClient | None) -> gym.Env[Any, Any]:
    if side == "local":
        return gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    assert client is not None
    env = RemoteEnv(client, kind="practice", transport=side)  # type: ignore[arg-type]
    if env.transport != side:
        raise SystemExit(f"asked the evaluator for transport {side}, got {env.transport}")
    return env


def make_loop(algo: str, env: TimedEnv, args: argparse.Namespace) -> Loop:
    if algo == "td3":
        return TD3Loop(env, args.seed, args.start_steps, args.buffer_size)
    return PPOLoop(env, args.seed, args.ppo_n_steps)


def _loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def measure(
    algo: str, task: TaskSpec, client: AleClient, args: argparse.Namespace
) -> dict[str, Any]:
    """Every side's slices for ``algo``: per side and round steps, wall, env time and CPU."""
    envs = {side: TimedEnv(make_env(side, task, client)) for side in args.side}
    loops: dict[str, Loop] = {}
    for side, env in envs.items():
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        loops[side] = make_loop(algo, env, args)
        loops[side].warm_up()
    per: dict[str, dict[str, list[float]]] = {
        s: {"steps_per_s": [], "env_ms": [], "agent_us": [], "evaluator_us": [], "steps": []}
        for s in args.side
    }
    loads: list[float] = []
    try:
        for r in range(args.rounds):
            loads.append(_loadavg())
            for side in args.side if r % 2 == 0 else reversed(args.side):
                env, loop = envs[side], loops[side]
                env_s0, (own0, kids0) = env.env_s, _cpu_now()
                t0 = time.perf_counter()
                steps = loop.run(args.td3_steps)
                wall = time.perf_counter() - t0
                own1, kids1 = _cpu_now()
                row = per[side]
                row["steps_per_s"].append(steps / wall)
                row["env_ms"].append((env.env_s - env_s0) * 1e3 / steps)
                row["agent_us"].append((own1 - own0) * 1e6 / steps)
                row["evaluator_us"].append((kids1 - kids0) * 1e6 / steps)
                row["steps"].append(steps)
        loads.append(_loadavg())
    finally:
        for env in envs.values():
            env.close()
    return {"per_round": per, "loadavg": loads}


def summarize(algo: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    per = data["per_round"]
    rows = []
    local_cpu = statistics.median(
        a + e for a, e in zip(per["local"]["agent_us"], per["local"]["evaluator_us"], strict=True)
    )
    for side, row in per.items():
        cpu = [a + e for a, e in zip(row["agent_us"], row["evaluator_us"], strict=True)]
        rates = row["steps_per_s"]
        vs_local = [a / b for a, b in zip(rates, per["local"]["steps_per_s"], strict=True)]
        env_ms = statistics.median(row["env_ms"])
        rows.append(
            {
                "algo": algo,
                "side": side,
                "steps_per_s": statistics.median(rates),
                "steps_per_s_min": min(rates),
                "steps_per_s_max": max(rates),
                "vs_local": statistics.median(vs_local),
                "vs_local_per_round": vs_local,
                "env_ms_per_step": env_ms,
                "env_share": env_ms * statistics.median(rates) / 1e3,
                "agent_cpu_us_per_step": statistics.median(row["agent_us"]),
                "evaluator_cpu_us_per_step": statistics.median(row["evaluator_us"]),
                "cpu_vs_local": statistics.median(cpu) / local_cpu,
                "steps": int(sum(row["steps"])),
            }
        )
    return rows


def print_table(task: TaskSpec, rows: list[dict[str, Any]], loads: list[float]) -> None:
    print(
        f"task {task.id} ({task.env.gym_id}), {os.cpu_count()} CPUs, torch threads "
        f"{torch.get_num_threads()}, load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"{'loop':<4} {'env':<6} {'steps/s':>15} {'/local':>16} {'env ms':>7} {'share':>6}")
    for r in rows:
        spread = f"({r['steps_per_s_min']:,.0f}-{r['steps_per_s_max']:,.0f})"
        per_round = r["vs_local_per_round"]
        ratio = f"{r['vs_local']:.3f} ({min(per_round):.2f}-{max(per_round):.2f})"
        print(
            f"{r['algo']:<4} {r['side']:<6} {r['steps_per_s']:>5,.0f} {spread:>9} {ratio:>16} "
            f"{r['env_ms_per_step']:>7.3f} {r['env_share']:>6.1%}"
        )
        print(
            f"{'':<11} CPU µs a step: agent {r['agent_cpu_us_per_step']:,.0f}, evaluator "
            f"{r['evaluator_cpu_us_per_step']:,.0f}; both / local's {r['cpu_vs_local']:.3f}"
        )


@contextlib.contextmanager
def _client(task: TaskSpec, sides: list[str]) -> Iterator[AleClient | None]:
    if sides == ["local"]:
        yield None
        return
    with evaluator(task.id, in_process=False) as client:
        try:
            yield client
        finally:
            client.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--task", default=DEFAULT_TASK, help=f"an interactive task (default {DEFAULT_TASK})"
    )
    p.add_argument(
        "--algo", action="append", choices=("td3", "ppo"), help="repeatable; default both"
    )
    p.add_argument("--side", action="append", choices=SIDES, help="repeatable; default all three")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--td3-steps", type=int, default=250, help="TD3's steps per side and round")
    p.add_argument("--start-steps", type=int, default=1000, help="TD3's random start")
    p.add_argument("--buffer-size", type=int, default=1_000_000)
    p.add_argument("--ppo-n-steps", type=int, default=2048)
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a smoke run: short slices, small loops")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    args.algo = args.algo or ["td3", "ppo"]
    args.side = args.side or list(SIDES)
    if "local" not in args.side:
        args.side.insert(0, "local")  # every ratio is against it
    if args.quick:
        args.rounds, args.td3_steps, args.start_steps = 2, 10, 50
        args.buffer_size, args.ppo_n_steps = 10_000, 128
    torch.set_num_threads(args.torch_threads)
    task = default_registry().get(args.task)
    rows: list[dict[str, Any]] = []
    loads: list[float] = []
    with _client(task, args.side) as client:
        for algo in args.algo:
            data = measure(algo, task, client, args)  # type: ignore[arg-type]
            rows += summarize(algo, data)
            loads += data["loadavg"]
    print_table(task, rows, loads)
    if args.json:
        machine = {"cpus": os.cpu_count(), "cpu": platform.processor(), "torch": torch.__version__}
        print(json.dumps({"task": task.id, "rows": rows, "loadavg": loads, "machine": machine}))


if __name__ == "__main__":
    main()
