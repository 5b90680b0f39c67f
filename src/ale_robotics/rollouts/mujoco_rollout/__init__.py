"""The ``mujoco_rollout`` rollout kind: a shard's MuJoCo physics stepped natively, all envs at once.

Registered as ``mujoco_rollout`` in ``pyproject.toml``; the kind is in :mod:`.kind`,
the batched rollout (and its two physics engines) in :mod:`.vectorized`, the
Gymnasium step semantics per env family in :mod:`.families`.
"""

from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, StepOut, StepView
from ale_robotics.rollouts.mujoco_rollout.kind import MujocoRolloutKind
from ale_robotics.rollouts.mujoco_rollout.vectorized import rollout_vectorized

__all__ = ["FAMILIES", "Family", "MujocoRolloutKind", "StepOut", "StepView", "rollout_vectorized"]
