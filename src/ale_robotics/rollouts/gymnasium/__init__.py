"""The ``gymnasium`` rollout kind: the contract's MLP on Gymnasium envs, stepped in the worker.

Registered as ``gymnasium`` in ``pyproject.toml``; see :mod:`.kind`.
"""

from ale_robotics.rollouts.gymnasium.kind import GymnasiumKind

__all__ = ["GymnasiumKind"]
