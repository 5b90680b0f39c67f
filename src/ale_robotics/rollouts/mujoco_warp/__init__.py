"""The ``mujoco_warp`` rollout kind: a shard's MuJoCo physics on MuJoCo Warp, in its own engine.

Registered as ``mujoco_warp`` (kind) and ``mujoco-warp`` (engine) in ``pyproject.toml``.
MuJoCo Warp needs mujoco >= 3.13 and the project pins 3.3, so the kind's shards run in
the engine environment of :mod:`.engine` (``ale-robotics engines install mujoco-warp``),
started by the executor. The kind (:mod:`.kind`) imports neither Warp nor MuJoCo: the
evaluator loads it to check a task and load a submission; the rollout
(:mod:`.rollout`, :mod:`.physics`) is imported only in a worker of the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.rollouts.mujoco_warp.engine import MujocoWarpEngine
    from ale_robotics.rollouts.mujoco_warp.kind import FAMILY_GYM_IDS, MujocoWarpKind

__all__ = ["FAMILY_GYM_IDS", "MujocoWarpEngine", "MujocoWarpKind"]

_WHERE = {
    "FAMILY_GYM_IDS": "ale_robotics.rollouts.mujoco_warp.kind",
    "MujocoWarpKind": "ale_robotics.rollouts.mujoco_warp.kind",
    "MujocoWarpEngine": "ale_robotics.rollouts.mujoco_warp.engine",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
