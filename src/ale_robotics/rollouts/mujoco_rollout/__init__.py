"""The ``mujoco_rollout`` rollout kind: a shard's MuJoCo physics stepped natively, all envs at once.

Registered as ``mujoco_rollout`` in ``pyproject.toml``; the kind is in :mod:`.kind`,
the batched rollout (and its two physics engines) in :mod:`.vectorized`, the
Gymnasium step semantics per env family in :mod:`.families`. The names below load on
first use (PEP 562): the registry loads this package to check a task config, which
needs only :mod:`.kind`, not numpy, MuJoCo or Gymnasium.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, StepOut, StepView
    from ale_robotics.rollouts.mujoco_rollout.kind import MujocoRolloutKind
    from ale_robotics.rollouts.mujoco_rollout.vectorized import rollout_vectorized

__all__ = ["FAMILIES", "Family", "MujocoRolloutKind", "StepOut", "StepView", "rollout_vectorized"]

_WHERE = {
    "FAMILIES": "ale_robotics.rollouts.mujoco_rollout.families",
    "Family": "ale_robotics.rollouts.mujoco_rollout.families",
    "StepOut": "ale_robotics.rollouts.mujoco_rollout.families",
    "StepView": "ale_robotics.rollouts.mujoco_rollout.families",
    "MujocoRolloutKind": "ale_robotics.rollouts.mujoco_rollout.kind",
    "rollout_vectorized": "ale_robotics.rollouts.mujoco_rollout.vectorized",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
