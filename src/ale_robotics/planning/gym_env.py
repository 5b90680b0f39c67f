"""``PandaPlanning-v0``: the planning problems as a Gymnasium env, for specs and local practice.

Task configs name an env (``env.gym_id``) so that ``GetSpec`` can describe the
observation and action spaces of every task the same way; the planning tasks
name this one, in Gymnasium's "module:id" form
(``ale_robotics.planning.gym_env:PandaPlanning-v0``), which imports this module
and so registers it. It is also a way for an agent to try paths locally:

* ``reset(seed=s)`` generates the problem of seed ``s`` (same generator as the
  evaluator's); the observation is the current and the goal configuration (14,).
* ``step(q)`` moves to joint configuration ``q`` (a waypoint) if the straight
  segment there is collision-free at the task's validation resolution; reward
  -1 and termination on a collision, +1 and termination within tolerance of the
  goal, else 0.

The evaluator never steps it: planning tasks are judged by
:mod:`ale_robotics.planning.validate` on the planner's whole path. PyBullet is
loaded at the first ``reset``, not at construction, so building the env for a
spec is cheap.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from ale_robotics.planning.robot import DOF, JOINT_LOWER, JOINT_UPPER
from ale_robotics.planning.settings import SCENE_TYPES, SceneType

__all__ = ["ENV_ID", "PandaPlanningEnv"]

ENV_ID = "PandaPlanning-v0"


class PandaPlanningEnv(gym.Env[npt.NDArray[np.float64], npt.NDArray[np.float64]]):
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        scene_types: list[SceneType] | None = None,
        resolution: float = 0.01,
        goal_tolerance: float = 0.01,
    ) -> None:
        low, high = np.asarray(JOINT_LOWER), np.asarray(JOINT_UPPER)
        self.observation_space = gym.spaces.Box(
            np.concatenate([low, low]), np.concatenate([high, high]), dtype=np.float64
        )
        self.action_space = gym.spaces.Box(low, high, dtype=np.float64)
        self.scene_types = list(scene_types or SCENE_TYPES)
        self.resolution = resolution
        self.goal_tolerance = goal_tolerance
        self._world: Any = None
        self._q = np.zeros(DOF)
        self._goal = np.zeros(DOF)

    def _obs(self) -> npt.NDArray[np.float64]:
        return np.concatenate([self._q, self._goal])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float64], dict[str, Any]]:
        from ale_robotics.planning.scenes import generate_problem
        from ale_robotics.planning.world import CollisionWorld

        super().reset(seed=seed)
        if self._world is None:
            self._world = CollisionWorld()
        problem_seed = seed if seed is not None else int(self.np_random.integers(0, 2**62))
        problem = generate_problem(problem_seed, self.scene_types, self._world)
        self._q, self._goal = np.asarray(problem.start), np.asarray(problem.goal)
        return self._obs(), {"scene_type": problem.scene_type, "boxes": len(problem.boxes)}

    def step(
        self, action: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], float, bool, bool, dict[str, Any]]:
        target = np.asarray(action, dtype=np.float64)
        if not self._world.within_limits(target):
            return self._obs(), -1.0, True, False, {"collided": False, "limits": False}
        n = max(1, math.ceil(float(np.abs(target - self._q).max()) / self.resolution))
        for k in range(1, n + 1):
            if self._world.in_collision(self._q + (target - self._q) * (k / n)):
                return self._obs(), -1.0, True, False, {"collided": True, "is_success": False}
        self._q = target
        done = bool(np.abs(self._q - self._goal).max() <= self.goal_tolerance)
        return (
            self._obs(),
            1.0 if done else 0.0,
            done,
            False,
            {"collided": False, "is_success": done},
        )

    def close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=f"{__name__}:PandaPlanningEnv")
