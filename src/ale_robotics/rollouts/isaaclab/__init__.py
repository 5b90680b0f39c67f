"""The ``isaaclab`` rollout kind: Isaac Lab 3's own env, kit-less, in its own engine.

Registered as ``isaaclab`` (kind and engine) in ``pyproject.toml``. Isaac Lab 3 needs
Python 3.12 and torch 2.11, so the kind's shards run in the engine environment of
:mod:`.engine` (``ale-robotics engines install isaaclab``). The kind (:mod:`.kind`), the
artifact's loader (:mod:`.checkpoint`: RSL-RL's ``model_<iteration>.pt``) and the spaces
env (:mod:`.spaces`) run in the evaluator and import no Isaac Lab; the rollout
(:mod:`.rollout`, :mod:`.offline`) runs only in a worker of the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.rollouts.isaaclab.engine import IsaacLabEngine
    from ale_robotics.rollouts.isaaclab.kind import IsaacLabKind

__all__ = ["IsaacLabEngine", "IsaacLabKind"]

_WHERE = {
    "IsaacLabKind": "ale_robotics.rollouts.isaaclab.kind",
    "IsaacLabEngine": "ale_robotics.rollouts.isaaclab.engine",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
