"""The ``mujoco_rollout`` rollout kind: a shard's MuJoCo physics stepped by ``mujoco.rollout``.

Registered as ``mujoco_rollout`` in ``pyproject.toml``; the kind is in :mod:`.kind`,
the vectorized step per env family in :mod:`.vectorized`.
"""

from ale_robotics.rollouts.mujoco_rollout.kind import MujocoRolloutKind
from ale_robotics.rollouts.mujoco_rollout.vectorized import FAMILIES, Family, rollout_vectorized

__all__ = ["FAMILIES", "Family", "MujocoRolloutKind", "rollout_vectorized"]
