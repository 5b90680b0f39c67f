"""Whether the paper's 1M TD3 steps fit each TD3 task's wall-clock budget, measured.

Every TD3 task's manifest budget gives the agent ``training_steps`` (the paper's 1M) and
``wall_clock_s``. This measures how fast the repository's reference agents actually train
on this machine, the way they train under the harness:

* batch tasks: ``examples/agents/td3_train.py``'s ``train`` (SB3 TD3, the paper's 1000
  random start steps and 0.1 exploration noise, the contract's 400-300 networks), on a
  practice session of the evaluator (``RemoteEnv``) when the task keeps the simulator in
  the evaluator (``td3-walker2d-repro``), else on a local env;
* interactive tasks: ``examples/agents/sb3_interactive.py``'s TD3 (SB3's defaults, 400-300)
  on a practice session.

The evaluator runs as its own process (``ale-robotics evaluator serve``, as under the
harness; ``benchmarks/interactive.py``'s ``evaluator``). Per task: the wall-clock and
agent CPU milliseconds per step over ``--steps`` training steps after the random start
(each step one env step and one TD3 update: the steady state that makes up all but the
first 1000 of the 1M), the seconds 1M such steps take, and whether they fit the task's
``wall_clock_s`` (after ``--margin`` of it for start-up, export and the evaluation). The
verdicts are what docs/tasks-and-scores.md states per task.

Usage::

    python benchmarks/td3_budget.py [--task ID ...] [--steps 1500] [--rounds 1]
                                    [--margin 0.1] [--json]

With ``--json`` the last line is ``{"rows": [{"task", "mode", "where", "ms_per_step",
"ms_per_step_min", "ms_per_step_max", "cpu_ms_per_step", "steps_1m_s", "wall_clock_s",
"fits", "steps_that_fit"}], "machine": {...}}`` (medians over the rounds).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from ale_robotics.client import RemoteEnv
from ale_robotics.tasks import TaskMode, TaskSpec, default_registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interactive import evaluator  # a sibling script: the same evaluator set-up

REPO = Path(__file__).resolve().parents[1]
TASKS = (
    "td3-inverted-pendulum-v2",
    "td3-inverted-double-pendulum-v1",
    "td3-reacher-v1",
    "td3-halfcheetah-vec-v1",
    "td3-hopper-v1",
    "td3-walker2d-repro-v3",
)
"""The TD3 tasks a run can start today (no superseded version), each with a 1M-step budget."""

LEARNING_STARTS = 1000
PAPER_STEPS = 1_000_000


def _agent(name: str) -> ModuleType:
    """A reference agent's module (examples/agents/NAME.py), for its training code."""
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / "agents" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Stopwatch(BaseCallback):
    """Wall and CPU time from the first step past the random start to the last step."""

    def __init__(self) -> None:
        super().__init__()
        self.start: tuple[float, float] | None = None
        self.end: tuple[float, float] | None = None
        self.steps = 0

    def _on_step(self) -> bool:
        now = (time.perf_counter(), time.process_time())
        if self.num_timesteps == LEARNING_STARTS + 1:
            self.start = now
        elif self.start is not None:
            self.end = now
            self.steps += 1
        return True

    def per_step_ms(self) -> tuple[float, float]:
        assert self.start is not None and self.end is not None and self.steps > 0
        return tuple(  # type: ignore[return-value]
            1e3 * (e - s) / self.steps for e, s in zip(self.end, self.start, strict=True)
        )


def _remote(task: TaskSpec) -> bool:
    return task.mode is TaskMode.INTERACTIVE or task.simulator_in_evaluator


@contextlib.contextmanager
def _env(task: TaskSpec) -> Iterator[RemoteEnv | None]:
    """A practice session where the reference agent trains on one; None: a local env."""
    if not _remote(task):
        yield None
        return
    with evaluator(task.id, in_process=False) as client:
        env = RemoteEnv(client, kind="practice")
        try:
            yield env
        finally:
            env.close()
            client.close()


def measure(task: TaskSpec, steps: int, seed: int) -> tuple[float, float]:
    """(wall ms, agent CPU ms) per steady-state training step of the task's reference agent."""
    total = LEARNING_STARTS + 1 + steps
    watch = Stopwatch()
    with _env(task) as env:
        if task.mode is TaskMode.INTERACTIVE:
            assert env is not None
            model = _agent("sb3_interactive").make_model("td3", env, seed, total)
            model.learn(total_timesteps=total, callback=watch)
        else:
            td3 = _agent("td3_train")
            td3.train(task, seed, total, float("inf"), LEARNING_STARTS, curve=watch, env=env)
    return watch.per_step_ms()


def verdict(task_id: str, walls: list[float], cpus: list[float], margin: float) -> dict[str, Any]:
    """One row: the medians, 1M steps' seconds, and whether they fit the budget."""
    reg = default_registry()
    task, entry = reg.get(task_id), reg.manifest_entry(task_id)
    assert entry is not None and entry.compute_budget is not None
    wall_clock_s = entry.compute_budget.wall_clock_s
    ms = statistics.median(walls)
    usable = wall_clock_s * (1 - margin)
    return {
        "task": task_id,
        "mode": task.mode.value,
        "where": "practice session" if _remote(task) else "local env",
        "ms_per_step": round(ms, 3),
        "ms_per_step_min": round(min(walls), 3),
        "ms_per_step_max": round(max(walls), 3),
        "cpu_ms_per_step": round(statistics.median(cpus), 3),
        "steps_1m_s": round(PAPER_STEPS * ms / 1e3),
        "wall_clock_s": wall_clock_s,
        "fits": PAPER_STEPS * ms / 1e3 <= usable,
        "steps_that_fit": int(usable * 1e3 / ms) // 1000 * 1000,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", action="append", choices=TASKS, help="default: every TD3 task")
    p.add_argument("--steps", type=int, default=1500, help="timed steps after the random start")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--margin", type=float, default=0.1, help="share of wall_clock_s kept aside")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    for task_id in args.task or TASKS:
        task = default_registry().get(task_id)
        walls, cpus = [], []
        for r in range(args.rounds):
            wall, cpu = measure(task, args.steps, args.seed + r)
            walls.append(wall)
            cpus.append(cpu)
        row = verdict(task_id, walls, cpus, args.margin)
        rows.append(row)
        print(
            f"{task_id:32s} {row['ms_per_step']:6.2f} ms/step ({row['where']}), 1M steps "
            f"{row['steps_1m_s'] / 3600:5.2f} h vs wall_clock_s {row['wall_clock_s']}: "
            + ("fits" if row["fits"] else f"does not fit ({row['steps_that_fit']:,} steps do)"),
            flush=True,
        )
    machine = {
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch_threads": _torch_threads(),
        "load_1min": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps({"rows": rows, "machine": machine}))
    return 0


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
