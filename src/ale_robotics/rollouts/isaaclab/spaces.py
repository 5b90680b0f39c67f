"""``IsaacLab-v0``: an Isaac Lab task's spaces as a Gymnasium env in the evaluator's process.

Task configs name an env (``env.gym_id``) so that ``GetSpec`` can describe every task's
observation and action spaces the same way; the evaluator's environment cannot hold Isaac
Lab (Python 3.12, its own torch), so an Isaac Lab task names this one in Gymnasium's
"module:id" form (``ale_robotics.rollouts.isaaclab.spaces:IsaacLab-v0``, which imports this
module and so registers it) with the Isaac Lab task in its kwargs (``{"task":
"Isaac-Cartpole-Direct"}``). It has the spaces of that task's policy observation and
action, as Isaac Lab declares them (unbounded float32 boxes), and nothing else: it cannot be
stepped. The episodes run in Isaac Lab itself, in the ``isaaclab`` engine (the evaluator's
and, for training, the agent's: ``ALE_ENGINE_PYTHON``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

__all__ = ["ENV_ID", "TASK_SPACES", "IsaacLabSpaces"]

ENV_ID = "IsaacLab-v0"

TASK_SPACES: dict[str, tuple[int, int]] = {"Isaac-Cartpole-Direct": (4, 1)}
"""Isaac Lab tasks the ``isaaclab`` kind runs -> (observation size, action size), as their
configs declare them (``observation_space``, ``action_space``; a test checks them against
Isaac Lab's env in the engine)."""


class IsaacLabSpaces(gym.Env[npt.NDArray[np.float32], npt.NDArray[np.float32]]):
    """The spaces of one Isaac Lab task (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(self, task: str) -> None:
        if task not in TASK_SPACES:
            raise ValueError(f"no Isaac Lab task {task!r} here; known: {sorted(TASK_SPACES)}")
        obs, act = TASK_SPACES[task]
        self.task = task
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (act,), dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        raise NotImplementedError(self._where())

    def step(
        self, action: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        raise NotImplementedError(self._where())

    def _where(self) -> str:
        return (
            f"{self.task} runs only in Isaac Lab: use the isaaclab engine's Python "
            "(ALE_ENGINE_PYTHON in an agent's sandbox; ale-robotics engines install isaaclab)"
        )


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=f"{__name__}:IsaacLabSpaces", disable_env_checker=True)
