"""Dense path validation: the only judge of a path in both planning tasks.

A planner's own collision checking (OMPL's at the agent's resolution, the EDMP
generator's sphere model) is a means to an end; whether a path is good is
decided here, the same way for every planner, in PyBullet:

1. the path is a finite (K, 7) array with K >= 1 whose first waypoint is the
   start (within the goal tolerance);
2. every waypoint is within the joint limits (straight segments between them
   then are too: the limits are a box);
3. each segment is interpolated linearly so that no joint moves more than
   ``resolution`` radians between two checked configurations, and every one of
   them, both ends included, is checked for self- and environment collision;
4. the last waypoint is within ``goal_tolerance`` radians of the goal in every
   joint.

Success needs all four. ``collided`` is set when step 3 finds a contact, so a
path can be unsuccessful without colliding (it stops short of the goal) but a
colliding path is never a success.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ale_robotics.planning.robot import DOF
from ale_robotics.planning.scenes import Problem
from ale_robotics.planning.world import CollisionWorld

__all__ = ["PathVerdict", "validate_path"]


@dataclass(frozen=True)
class PathVerdict:
    success: bool
    collided: bool
    within_limits: bool
    reached_goal: bool
    states_checked: int
    reason: str
    """Why the path failed ("" on success); evaluator text, never agent text."""


def _fail(
    reason: str, *, collided: bool = False, limits: bool = True, checked: int = 0
) -> PathVerdict:
    return PathVerdict(False, collided, limits, False, checked, reason)


def validate_path(
    world: CollisionWorld,
    problem: Problem,
    path: npt.NDArray[np.float64] | None,
    *,
    resolution: float,
    goal_tolerance: float,
    max_states: int,
) -> PathVerdict:
    """Check ``path`` against ``problem``; ``world`` must hold the problem's scene."""
    if path is None or path.size == 0:
        return _fail("no path")
    path = np.asarray(path, dtype=np.float64)
    if path.ndim != 2 or path.shape[1] != DOF or not np.isfinite(path).all():
        return _fail(f"malformed path of shape {list(path.shape)}")
    start, goal = np.asarray(problem.start), np.asarray(problem.goal)
    if np.abs(path[0] - start).max() > goal_tolerance:
        return _fail("the path does not begin at the start configuration")
    within = all(world.within_limits(q) for q in path)
    steps = [
        max(1, math.ceil(float(np.abs(b - a).max()) / resolution))
        for a, b in itertools.pairwise(path)
    ]
    total = 1 + sum(steps)
    if total > max_states:
        return _fail(
            f"the path needs {total} checks at this resolution; at most {max_states}", limits=within
        )
    checked = 1
    if world.in_collision(path[0]):
        return _fail("collision at the first waypoint", collided=True, limits=within, checked=1)
    for i, n in enumerate(steps):
        a, b = path[i], path[i + 1]
        for k in range(1, n + 1):
            checked += 1
            if world.in_collision(a + (b - a) * (k / n)):
                return _fail(
                    f"collision on segment {i} at fraction {k / n:.3f}",
                    collided=True,
                    limits=within,
                    checked=checked,
                )
    reached = bool(np.abs(path[-1] - goal).max() <= goal_tolerance)
    if not within:
        return PathVerdict(
            False, False, False, reached, checked, "a waypoint is outside the joint limits"
        )
    if not reached:
        return PathVerdict(False, False, True, False, checked, "the path ends away from the goal")
    return PathVerdict(True, False, True, True, checked, "")
