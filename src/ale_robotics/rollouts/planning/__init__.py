"""The planning rollout kinds, ``planner`` and ``edmp``: hidden-seed motion-planning problems.

Both registered in ``pyproject.toml`` (two entry points, one folder); the kinds are
in :mod:`.kind`, the artifact loading and problem loop in :mod:`.problems`. The
planning library itself (scenes, collision world, OMPL, EDMP) is
:mod:`ale_robotics.planning`.
"""

from ale_robotics.rollouts.planning.kind import (
    CPU_CLOCK_METRICS,
    PLANNING_METRICS,
    EdmpKind,
    PlannerKind,
    PlanningKind,
)
from ale_robotics.rollouts.planning.problems import (
    CONFIG_KEY,
    load_planning_artifact,
    planning_episodes,
)

__all__ = [
    "CONFIG_KEY",
    "CPU_CLOCK_METRICS",
    "PLANNING_METRICS",
    "EdmpKind",
    "PlannerKind",
    "PlanningKind",
    "load_planning_artifact",
    "planning_episodes",
]
