"""Dense path validation: a path through an obstacle, past a joint limit or short of the goal
fails; a clear one passes."""

from __future__ import annotations

import numpy as np
import pytest

from ale_robotics.planning.scenes import Problem
from ale_robotics.planning.validate import validate_path
from ale_robotics.planning.world import Box, CollisionWorld

READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
LEFT, RIGHT = READY.copy(), READY.copy()
LEFT[0], RIGHT[0] = 1.2, -1.2
# The gripper is inside this box at READY, clear of it at LEFT and RIGHT: swinging joint 1
# from LEFT to RIGHT passes through it.
OBSTACLE = Box((0.31, 0.0, 0.49), (0.03, 0.03, 0.03))


def _check(world: CollisionWorld, boxes: tuple[Box, ...], path: np.ndarray | None):  # type: ignore[no-untyped-def]
    problem = Problem("tabletop", boxes, tuple(LEFT), tuple(RIGHT))
    world.set_scene(boxes)
    return validate_path(
        world, problem, path, resolution=0.01, goal_tolerance=0.01, max_states=10_000
    )


def test_a_path_through_an_obstacle_is_rejected(world: CollisionWorld) -> None:
    v = _check(world, (OBSTACLE,), np.stack([LEFT, RIGHT]))
    assert not v.success and v.collided
    assert v.reason.startswith("collision on segment 0")
    # the waypoints alone are clear: only the dense interpolation finds the collision
    assert not world.in_collision(LEFT) and not world.in_collision(RIGHT)


def test_a_clear_path_is_accepted(world: CollisionWorld) -> None:
    v = _check(world, (), np.stack([LEFT, READY, RIGHT]))
    assert v.success and not v.collided and v.reason == ""
    assert v.states_checked == 1 + 2 * 120  # 1.2 rad per segment at 0.01 rad


def test_a_joint_limit_violation_fails(world: CollisionWorld) -> None:
    over = READY.copy()
    over[3] = 0.05  # joint 4's upper limit is 0.0
    v = _check(world, (), np.stack([LEFT, over, RIGHT]))
    assert not v.success and not v.within_limits and not v.collided
    assert "joint limits" in v.reason


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (None, "no path"),
        (np.zeros((0, 7)), "no path"),
        (np.zeros((2, 6)), "malformed path"),
        (np.stack([READY, RIGHT]), "does not begin at the start"),
        (np.stack([LEFT, READY]), "ends away from the goal"),
        (np.stack([LEFT, np.full(7, np.nan)]), "malformed path"),
    ],
)
def test_other_failures_are_named(
    world: CollisionWorld, path: np.ndarray | None, reason: str
) -> None:
    v = _check(world, (), path)
    assert not v.success and reason in v.reason


def test_a_path_too_long_to_check_fails(world: CollisionWorld) -> None:
    problem = Problem("tabletop", (), tuple(LEFT), tuple(RIGHT))
    world.set_scene(())
    v = validate_path(
        world,
        problem,
        np.stack([LEFT, RIGHT]),
        resolution=0.01,
        goal_tolerance=0.01,
        max_states=100,
    )
    assert not v.success and "at most 100" in v.reason
