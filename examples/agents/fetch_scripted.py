"""Reference agent for fetch-pickplace-trajset-v1: a scripted pick-and-place controller.

The task publishes N problem instances (``eval.base_seeds``) and replays a hidden subset of the
submitted action sequences open-loop. Since the simulation is deterministic given the reset
seed, a plan can be made closed-loop here and replayed blind there: for every instance this agent
resets its own env with ``reset(seed=instance)``, drives the classic scripted controller from the
observations, and records the exact float32 actions it stepped with. Then it replays every
recorded sequence open-loop itself, the way the evaluator will, and submits
``trajectories.npz`` (``seeds`` int64 (N,), ``actions`` float32 (N, T, 4)).

The controller (a proportional step toward a phase's target, the gripper open or closed):

1. move to 5 cm above the block, gripper open;
2. descend onto the block;
3. close the gripper for a few steps;
4. carry the block to the goal (servoing the block's position, not the gripper's) and hold it.

Two modes:

* under the harness (default): the spec comes from the evaluator through ``AleClient``; the file
  goes to ``client.submission_dir``, is submitted, and the final job state is printed. The
  official metric is computed by the evaluator on its hidden subset and never shown here.
* ``--offline [--task-config PATH] [--out DIR]``: no evaluator. The spec is the installed task
  config (or PATH); the local success rate over all instances is printed, and the file is
  written to DIR when given.

Exit status: 0 when the job succeeded (or offline, always); 1 when it ended in any other
terminal state, with the evaluator's reason; 2 when the local open-loop replay does not
reproduce the closed-loop run (the submission would not mean what it was planned to).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from ale_robotics.tasks import TaskSpec

FILE_NAME = "trajectories.npz"

#: Proportional gain: action = GAIN * position error, clipped to [-1, 1]. Fetch moves the
#: gripper's mocap target by 5 cm per unit of action per step, so errors above 10 cm go at
#: full speed and smaller ones converge in a few steps without overshoot.
GAIN = 10.0
#: Hover height above the block before descending, so the open fingers clear it.
HOVER = 0.05
#: Steps the gripper closes for before lifting; fewer lets the block slip.
CLOSE_STEPS = 3
#: Phase transitions: horizontal / vertical / 3-D tolerance in metres.
XY_TOL, Z_TOL, GRASP_TOL = 0.01, 0.02, 0.01


@dataclass
class Controller:
    """The scripted policy's state across one episode (its phase and grasp timer)."""

    phase: int = 0
    closed_for: int = 0
    log: list[int] = field(default_factory=list)

    def __call__(self, obs: dict[str, npt.NDArray[np.float64]]) -> npt.NDArray[np.float32]:
        o, goal = obs["observation"], obs["desired_goal"]
        grip, block = o[0:3], o[3:6]
        action = np.zeros(4)
        if self.phase == 0:  # above the block, gripper open
            target = block + np.array([0.0, 0.0, HOVER])
            action[:3], action[3] = GAIN * (target - grip), 1.0
            if np.linalg.norm(target[:2] - grip[:2]) < XY_TOL and abs(target[2] - grip[2]) < Z_TOL:
                self.phase = 1
        if self.phase == 1:  # down onto it
            action[:3], action[3] = GAIN * (block - grip), 1.0
            if np.linalg.norm(block - grip) < GRASP_TOL:
                self.phase = 2
        if self.phase == 2:  # close
            action[:3], action[3] = GAIN * (block - grip), -1.0
            self.closed_for += 1
            if self.closed_for >= CLOSE_STEPS:
                self.phase = 3
        if self.phase == 3:  # carry the block to the goal and hold it there
            action[:3], action[3] = GAIN * (goal - block), -1.0
        self.log.append(self.phase)
        # float32, as submitted: the exact values stepped here are the ones replayed there
        return np.clip(action, -1.0, 1.0).astype(np.float32)


def make_env(task: TaskSpec) -> Any:
    return gym.make(
        task.env.gym_id,
        max_episode_steps=task.env.max_episode_steps,
        disable_env_checker=True,
        **task.env.kwargs,
    )


def plan(env: Any, instance: int, steps: int) -> tuple[npt.NDArray[np.float32], bool]:
    """Closed-loop run of the controller on one instance: (actions (steps, 4), solved)."""
    obs, _ = env.reset(seed=instance)
    ctrl = Controller()
    actions = np.zeros((steps, 4), dtype=np.float32)
    info: dict[str, Any] = {}
    for t in range(steps):
        actions[t] = ctrl(obs)
        obs, _, _, _, info = env.step(actions[t])
    return actions, bool(info["is_success"])


def replay(env: Any, instance: int, actions: npt.NDArray[np.float32]) -> bool:
    """Open-loop replay, as the evaluator does it: did the episode end solved?"""
    env.reset(seed=instance)
    info: dict[str, Any] = {}
    for a in actions:
        _, _, _, _, info = env.step(a)
    return bool(info["is_success"])


def solve(task: TaskSpec) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], list[bool]]:
    """Plan every published instance; returns (seeds, actions, solved per instance).

    Raises RuntimeError when an open-loop replay disagrees with its closed-loop run.
    """
    instances = task.eval.base_seeds
    steps = task.env.max_episode_steps
    env = make_env(task)
    try:
        act_dim = int(env.action_space.shape[0])
        actions = np.zeros((len(instances), steps, act_dim), dtype=np.float32)
        solved: list[bool] = []
        for i, instance in enumerate(instances):
            actions[i], ok = plan(env, instance, steps)
            if replay(env, instance, actions[i]) != ok:
                raise RuntimeError(f"instance {instance}: open-loop replay differs from the plan")
            solved.append(ok)
    finally:
        env.close()
    return np.asarray(instances, dtype=np.int64), actions, solved


def write(path: Path, seeds: npt.NDArray[np.int64], actions: npt.NDArray[np.float32]) -> Path:
    """Write the contract's npz; a stale symlink is replaced (the evaluator refuses links)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    with open(path, "wb") as fh:
        np.savez(fh, seeds=seeds, actions=actions)
    return path


def _summary(solved: list[bool], started: float) -> str:
    return (
        f"local success {sum(solved)}/{len(solved)} = {sum(solved) / len(solved):.3f} "
        f"over all published instances ({time.monotonic() - started:.1f}s)"
    )


def run_offline(args: argparse.Namespace, started: float) -> int:
    if args.task_config is not None:
        task = TaskSpec.model_validate_json(args.task_config.read_bytes())
    else:
        from ale_robotics.tasks import default_registry

        task = default_registry().get(args.task)
    try:
        seeds, actions, solved = solve(task)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(_summary(solved, started), flush=True)
    if args.out is not None:
        print(f"wrote {write(args.out / FILE_NAME, seeds, actions)}")
    return 0


def run_harness(started: float) -> int:
    from ale_robotics.client import AleClient  # imported here: offline mode needs no SDK

    client = AleClient.from_env()
    spec = client.get_spec()
    task = spec.task
    print(f"task {task.id}: planning {len(task.eval.base_seeds)} instances", flush=True)
    try:
        seeds, actions, solved = solve(task)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(_summary(solved, started), flush=True)
    if client.submission_dir is None:
        print("error: ALE_SUBMISSION_DIR is not set", file=sys.stderr)
        return 2
    target = write(client.submission_dir / FILE_NAME, seeds, actions)
    print(f"wrote {target} ({target.stat().st_size} bytes)", flush=True)
    job_id = client.submit()
    print(f"submitted job {job_id}; waiting for the evaluator ...", flush=True)
    status = client.wait(job_id)
    print(
        f"job {job_id} finished: {status.state} "
        f"({status.episodes_done}/{status.episodes_total} episodes)",
        flush=True,
    )
    if status.state == "SUCCEEDED":
        print("evaluation complete; the harness reports the score")
        return 0
    print(f"error: job {job_id} ended {status.state}: {status.failure_reason}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--offline", action="store_true", help="no evaluator: plan and report")
    parser.add_argument(
        "--task", default="fetch-pickplace-trajset-v1", help="installed task id (offline mode)"
    )
    parser.add_argument("--task-config", type=Path, help="task config JSON (offline mode)")
    parser.add_argument("--out", type=Path, help="directory for trajectories.npz (offline mode)")
    args = parser.parse_args(argv)
    if not args.offline and (args.task_config is not None or args.out is not None):
        parser.error("--task-config/--out are offline options; under the harness the spec rules")
    started = time.monotonic()
    return run_offline(args, started) if args.offline else run_harness(started)


if __name__ == "__main__":
    sys.exit(main())
