"""The ``replay`` rollout kind: submitted action sequences replayed open-loop on hidden instances.

Registered as ``replay`` in ``pyproject.toml``; the kind is :mod:`.kind`, the npz
validation, hidden subset and replay loop :mod:`.trajectories`.
"""

from ale_robotics.rollouts.replay.kind import ReplayKind
from ale_robotics.rollouts.replay.trajectories import (
    ACTIONS_KEY,
    SEEDS_KEY,
    TRAJECTORIES_ROLE,
    load_trajectories,
    replay_episodes,
    select_subset,
)

__all__ = [
    "ACTIONS_KEY",
    "SEEDS_KEY",
    "TRAJECTORIES_ROLE",
    "ReplayKind",
    "load_trajectories",
    "replay_episodes",
    "select_subset",
]
