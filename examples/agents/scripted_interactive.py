"""Scripted reference agents for five interactive tasks: baselines, not attempts at the paper.

Each controller is a few lines of numpy on the task's observation, with fixed
constants and no learning, so a run is deterministic and takes seconds. They show
that a task runs end to end through ``ale-robotics run`` and what a simple
non-learning controller scores; trained agents (``sb3_interactive.py``) are meant
to beat them.

* ``td3-hopper-v1``: PD on the three leg joints towards 0; stands still for the
  1000 steps (alive bonus only), no hopping.
* ``td3-reacher-v1``: Jacobian-transpose reaching with joint damping.
* ``tdmpc2-cheetah-run-v2`` (and v1): open-loop sine gait (10 agent steps a period) with
  torso-pitch feedback on the thighs; runs slowly.
* ``tdmpc2-walker-run-v2`` (and v1): PD holding every joint at 0 (legs straight); does not
  run and mostly falls over: close to the floor of the task's returns.
* ``tdmpc2-mw-push-v2`` (and v1): over the puck, down, close the gripper, carry it to the goal.

The Meta-World controller is written here from the observation layout (hand
position 0:3, gripper opening 3, puck position 4:7, goal 36:39); Meta-World's own
scripted policies (``metaworld.policies``) cannot be imported in the agent sandbox.

Under the harness the agent opens the run's eval session right away, with one env
per episode (``RemoteVectorEnv``, at most the task's ``max_envs_per_session``), and
steps them all together; the evaluator measures the official metric. Offline
(``--offline --task ID``), it runs the same controller in a local Gymnasium env on
public seeds (1000, 1001, ...) and prints the returns, which are not the official
metric.

    ale-robotics run td3-hopper-v1 --agent "python examples/agents/scripted_interactive.py"
    ale-robotics run td3-hopper-v1 --episodes 2 \\
        --agent "python examples/agents/scripted_interactive.py"   # smoke run
    python examples/agents/scripted_interactive.py --offline --task tdmpc2-mw-push-v1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Obs = npt.NDArray[Any]
Policy = Callable[[Obs, int], Obs]
"""(one env's observation, agent steps taken in its episode) -> action."""


def hopper_stand(obs: Obs, t: int) -> Obs:
    """Hopper-v5 obs: qpos[1:] (z, torso pitch, thigh, leg, foot), qvel (6)."""
    joints, joint_vel = obs[2:5], obs[8:11]
    return -2.0 * joints - 0.2 * joint_vel


REACHER_LINKS = (0.1, 0.11)


def reacher_reach(obs: Obs, t: int) -> Obs:
    """Reacher-v5 obs: cos q (2), sin q (2), target (2), qvel (2), fingertip - target (2)."""
    q1, q2 = np.arctan2(obs[2], obs[0]), np.arctan2(obs[3], obs[1])
    l1, l2 = REACHER_LINKS
    jacobian = np.array(
        [
            [-l1 * np.sin(q1) - l2 * np.sin(q1 + q2), -l2 * np.sin(q1 + q2)],
            [l1 * np.cos(q1) + l2 * np.cos(q1 + q2), l2 * np.cos(q1 + q2)],
        ]
    )
    return 25.0 * jacobian.T @ (-obs[8:10]) - 0.1 * obs[6:8]


def cheetah_gait(obs: Obs, t: int) -> Obs:
    """cheetah obs: position (rootz, pitch, 6 joints), velocity (9); a 10-step trot."""
    phase = 2 * np.pi * t / 10
    back, front = np.sin(phase), np.sin(phase + np.pi / 2)
    pitch_fix = -0.5 * obs[1]  # lean against a rising nose or tail, or the gait flips it
    return np.array([back + pitch_fix, back, back, front + pitch_fix, front, front])


def walker_stand(obs: Obs, t: int) -> Obs:
    """walker obs: orientations (xx, xz of 7 bodies), height, velocity (3 root + 6 joints)."""
    angles = np.arctan2(obs[1:14:2], obs[0:14:2])  # torso, r thigh, r leg, r foot, l ...
    parent, child = [0, 1, 2, 0, 4, 5], [1, 2, 3, 4, 5, 6]
    joints = angles[child] - angles[parent]
    return -1.0 * joints - 0.1 * obs[18:24]


def mw_push(obs: Obs, t: int) -> Obs:
    """Meta-World push-v3: (dx, dy, dz, grip); 1 unit moves the hand about 1 cm per env step."""
    hand, puck, goal = obs[0:3], obs[4:7], obs[36:39]
    offset = float(np.linalg.norm(hand[:2] - puck[:2]))
    grip = -1.0  # open
    if offset > 0.04:  # travel above the puck
        target = np.array([puck[0], puck[1], max(hand[2], puck[2] + 0.1)])
    elif offset > 0.02:  # line up
        target = np.array([puck[0], puck[1], hand[2]])
    elif hand[2] - puck[2] > 0.04:  # go down around it
        target = puck.copy()
    elif obs[3] > 0.6:  # close the gripper before moving
        target, grip = hand.copy(), 1.0
    else:  # carry it to the goal
        target, grip = np.array([goal[0], goal[1], goal[2] + 0.03]), 1.0
    return np.append(10.0 * (target - hand), grip)


POLICIES: dict[str, Policy] = {
    "td3-hopper": hopper_stand,
    "td3-reacher": reacher_reach,
    "tdmpc2-cheetah-run": cheetah_gait,
    "tdmpc2-walker-run": walker_stand,
    "tdmpc2-mw-push": mw_push,
}
"""By task, any version (``tdmpc2-cheetah-run-v1`` and ``-v2`` differ in their budget only)."""


def act(policy: Policy, obs: Obs, steps: Obs, space: Any) -> Obs:
    """One action per env, clipped to the action space and cast to its dtype."""
    actions = np.stack([policy(o, int(k)) for o, k in zip(obs, steps, strict=True)])
    return np.clip(actions, space.low, space.high).astype(space.dtype)


def run_eval_session(policy: Policy) -> None:
    """Play the whole eval budget, every episode in its own env of one vector session."""
    from ale_robotics.client import AleClient, RemoteVectorEnv

    with AleClient.from_env() as client:
        limits = client.get_spec().raw.limits
    num_envs = max(1, min(limits.eval_episodes, limits.max_envs_per_session))
    env = RemoteVectorEnv.from_env(num_envs=num_envs, kind="eval")
    try:
        print(f"eval session: {env.episode_budget} episodes, {num_envs} envs", flush=True)
        obs, _ = env.reset()
        steps = np.zeros(num_envs, dtype=np.int64)
        returns = np.zeros(num_envs)
        restarting = np.zeros(num_envs, dtype=bool)  # NEXT_STEP autoreset happens this step
        while not env.eval_complete:
            obs, reward, terminated, truncated, info = env.step(
                act(policy, obs, steps, env.single_action_space)
            )
            steps = np.where(restarting, 0, steps + 1)
            returns = np.where(restarting, 0.0, returns + reward)
            done = terminated | truncated
            for i in np.flatnonzero(done):
                success = info["success"][i] if "success" in info else None
                extra = "" if success is None else f", success {bool(success)}"
                # our own sums; the official metric is the evaluator's
                print(f"env {i}: return {returns[i]:.1f} in {steps[i]} steps{extra}", flush=True)
            restarting = done
        print(f"eval complete: {env.episodes_completed} episodes", flush=True)
    finally:
        env.close()


def run_offline(task_id: str, policy: Policy, episodes: int) -> None:
    """The controller in a local env on public seeds 1000.. (not the official metric)."""
    import gymnasium as gym

    from ale_robotics.tasks import default_registry

    task = default_registry().get(task_id)
    env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    returns, successes = [], []
    for seed in range(1000, 1000 + episodes):
        obs, _ = env.reset(seed=seed)
        ret, t, done, info = 0.0, 0, False, {}
        while not done:
            action = act(policy, obs[None], np.array([t]), env.action_space)[0]
            obs, reward, terminated, truncated, info = env.step(action)
            ret, t, done = ret + float(reward), t + 1, terminated or truncated
        returns.append(ret)
        successes.append(info.get("success"))
        print(f"seed {seed}: return {ret:.2f}, {t} steps, success {info.get('success')}")
    line = f"mean return {np.mean(returns):.2f} over {episodes} episodes"
    if all(s is not None for s in successes):
        line += f", success rate {np.mean([bool(s) for s in successes]):.2f}"
    print(line)
    env.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--offline", action="store_true", help="Run locally, no evaluator.")
    p.add_argument("--task", help="Task id (offline; under the harness ALE_TASK_ID is used).")
    p.add_argument("--episodes", type=int, default=10, help="Offline episodes.")
    args = p.parse_args()
    import os

    task_id = args.task or os.environ.get("ALE_TASK_ID", "")
    policy = POLICIES.get(task_id.rsplit("-v", 1)[0])
    if policy is None:
        sys.exit(f"no scripted controller for task {task_id!r}; known: {sorted(POLICIES)}")
    if args.offline:
        run_offline(task_id, policy, args.episodes)
    else:
        run_eval_session(policy)


if __name__ == "__main__":
    main()
