"""The ``mujoco_rollout`` rollout kind: a shard's MuJoCo physics stepped natively, all envs at once.

Registered as ``mujoco_rollout`` in ``pyproject.toml``; the kind is in :mod:`.kind`,
the batched rollout (and its two physics engines) in :mod:`.vectorized`, the
Gymnasium step semantics per env family in :mod:`.families`. The names below load on
first use (PEP 562): the registry loads this package to check a task config, which
needs only :mod:`.kind`, not numpy, MuJoCo or Gymnasium.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, StepOut, StepView
    from ale_robotics.rollouts.mujoco_rollout.kind import MujocoRolloutKind
    from ale_robotics.rollouts.mujoco_rollout.vectorized import rollout_vectorized

__all__ = ["FAMILIES", "Family", "MujocoRolloutKind", "StepOut", "StepView", "rollout_vectorized"]

_WHERE = {
    "FAMILIES": "families",
    "Family": "families",
    "StepOut": "families",
    "StepView": "families",
    "MujocoRolloutKind": "kind",
    "rollout_vectorized": "vectorized",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
