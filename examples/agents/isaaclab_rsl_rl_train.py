"""Train Isaac Lab's direct cartpole with RSL-RL on the CPU, as Isaac Lab's own train.py does.

Run with the ``isaaclab`` engine's Python (Python 3.12, Isaac Lab 3.0.0 kit-less, RSL-RL
5.5.1): in a run's sandbox that is ``$ALE_ENGINE_PYTHON``, which ``isaaclab_rsl_rl.py``
starts this with; by hand, the ``venv/bin/python`` of ``ale-robotics engines list``'s
isaaclab build::

    $PY examples/agents/isaaclab_rsl_rl_train.py --out /tmp/cartpole --assets DIR

The steps are those of Isaac Lab's ``scripts/reinforcement_learning/rsl_rl/train.py``: the
task's env config (``parse_env_cfg``) and its RSL-RL runner config
(``CartpoleDirectPPORunnerCfg``: PPO, a [32, 32] ELU actor and critic, 16 steps per env
and iteration), Isaac Lab's ``RslRlVecEnvWrapper``, ``OnPolicyRunner.learn``, which writes
``model_<iteration>.pt`` into ``--out`` (the file the task takes). Only the sizes differ,
for a CPU: ``--num-envs`` (Isaac Lab's default is 4096, for a GPU) and ``--iterations``
(150 there, 100 here: 64 envs balance the pole after about 60). Kit-less and offline:
``--assets`` is the task's asset root (Isaac Lab would fetch its assets from NVIDIA's
server), given as ``ISAACSIM_ASSET_ROOT``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

TASK = "Isaac-Cartpole-Direct"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="the runner's log directory")
    parser.add_argument("--assets", type=Path, required=True, help="ISAACSIM_ASSET_ROOT")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=2, help="torch's CPU threads")
    args = parser.parse_args(argv)
    os.environ["ISAACSIM_ASSET_ROOT"] = str(args.assets)  # before Isaac Lab reads it

    from importlib import metadata

    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  # registers Isaac Lab's tasks
    import torch
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper, handle_deprecated_rsl_rl_cfg
    from isaaclab_tasks.core.cartpole.agents.rsl_rl_ppo_cfg import CartpoleDirectPPORunnerCfg
    from isaaclab_tasks.utils import parse_env_cfg
    from rsl_rl.runners import OnPolicyRunner

    torch.set_num_threads(args.threads)
    started = time.monotonic()
    agent_cfg = CartpoleDirectPPORunnerCfg()
    agent_cfg.seed = args.seed
    agent_cfg.device = "cpu"
    agent_cfg.max_iterations = args.iterations
    agent_cfg = handle_deprecated_rsl_rl_cfg(agent_cfg, metadata.version("rsl-rl-lib"))
    env_cfg = parse_env_cfg(TASK, device="cpu", num_envs=args.num_envs)
    env_cfg.seed = agent_cfg.seed
    env = RslRlVecEnvWrapper(gym.make(TASK, cfg=env_cfg), clip_actions=agent_cfg.clip_actions)
    runner = OnPolicyRunner(env, agent_cfg.to_dict(), log_dir=str(args.out), device="cpu")
    runner.learn(num_learning_iterations=agent_cfg.max_iterations, init_at_random_ep_len=True)
    env.close()
    saved = sorted(args.out.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    summary = {
        "checkpoint": str(saved[-1]),
        "task": TASK,
        "num_envs": args.num_envs,
        "iterations": args.iterations,
        "seed": args.seed,
        "seconds": round(time.monotonic() - started, 1),
    }
    print("TRAINED " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
