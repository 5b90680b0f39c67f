"""Rollout kinds: how a batch task's episodes are produced, one folder per kind.

::

    base.RolloutKind            the interface (imports nothing of ours)
    registry                    kinds by name, from the entry points "ale_robotics.rollout_kinds"
    policy.PolicyRolloutKind    defaults of the kinds that roll out the contract's MLP
    ├── gymnasium/              Gymnasium envs stepped in the worker
    └── mujoco_rollout/         a shard's physics stepped together by mujoco.rollout
    replay/                     submitted action sequences replayed open-loop
    planning/                   "planner" (OMPL) and "edmp" on hidden-seed scenes

The evaluator sees a kind only through :class:`RolloutKind`, found by
:func:`get_kind`; this package's top level exports just those (no kind is
imported here, so importing it is as cheap as the registry).
"""

from ale_robotics.rollouts.base import Artifact, EpisodeCallback, RolloutKind, Shard
from ale_robotics.rollouts.registry import ENTRY_POINT_GROUP, get_kind, kind_names

__all__ = [
    "ENTRY_POINT_GROUP",
    "Artifact",
    "EpisodeCallback",
    "RolloutKind",
    "Shard",
    "get_kind",
    "kind_names",
]
