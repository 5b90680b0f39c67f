"""Gymnasium adapters for simulators that are not Gymnasium envs themselves.

Importing this module registers the ids below with Gymnasium. Task configs name
them in Gymnasium's ``module:id`` form (``ale_robotics.envs:DMC-cheetah-run-v0``),
which makes ``gym.make`` import this module first, so the evaluator, its worker
processes, ``GetSpec`` and an agent's local copy of the env all find them with
no other change. The simulators are imported only when an env is made.

* ``DMC-cheetah-run-v0``, ``DMC-walker-run-v0``: dm_control suite tasks
  (:mod:`ale_robotics.envs.dmc`), TD-MPC2's protocol: action repeat 2, 500 agent steps;
* ``MW-push-v3-v0``: Meta-World ``push-v3``, goal observable
  (:mod:`ale_robotics.envs.metaworld_env`), TD-MPC2's protocol: action repeat 2,
  100 agent steps, success at the last step.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

__all__ = ["DMC_TASKS", "METAWORLD_TASKS"]

DMC_TASKS: dict[str, tuple[str, str]] = {
    "DMC-cheetah-run-v0": ("cheetah", "run"),
    "DMC-walker-run-v0": ("walker", "run"),
}
"""Gymnasium id -> dm_control (domain, task)."""

METAWORLD_TASKS: dict[str, str] = {"MW-push-v3-v0": "push-v3"}
"""Gymnasium id -> Meta-World task name."""


def _register() -> None:
    for gym_id, (domain, task) in DMC_TASKS.items():
        if gym_id not in registry:
            register(
                id=gym_id,
                entry_point="ale_robotics.envs.dmc:DMCEnv",
                kwargs={"domain": domain, "task": task, "action_repeat": 2},
                max_episode_steps=500,
            )
    for gym_id, name in METAWORLD_TASKS.items():
        if gym_id not in registry:
            register(
                id=gym_id,
                entry_point="ale_robotics.envs.metaworld_env:MetaWorldEnv",
                kwargs={"task_name": name, "action_repeat": 2},
                max_episode_steps=100,
            )


_register()
