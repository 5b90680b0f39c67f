"""The procedural MπNets-style problems: deterministic in the seed, valid, and the robot model
they rely on (joint limits, numpy kinematics) agrees with PyBullet."""

from __future__ import annotations

import numpy as np
import pytest

from ale_robotics.planning.robot import JOINT_LOWER, JOINT_UPPER, chain
from ale_robotics.planning.scenes import SCENE_TYPES, generate_problem
from ale_robotics.planning.world import CollisionWorld


def test_same_seed_same_problem_even_in_a_fresh_world(world: CollisionWorld) -> None:
    first = generate_problem(123456789, SCENE_TYPES, world)
    generate_problem(42, SCENE_TYPES, world)  # state left behind must not matter
    assert generate_problem(123456789, SCENE_TYPES, world) == first
    with CollisionWorld() as fresh:
        assert generate_problem(123456789, SCENE_TYPES, fresh) == first
    assert generate_problem(123456790, SCENE_TYPES, world) != first


@pytest.mark.parametrize("kind", SCENE_TYPES)
def test_start_and_goal_are_valid(world: CollisionWorld, kind: str) -> None:
    for seed in range(4):
        p = generate_problem(seed, [kind], world)  # type: ignore[list-item]
        assert p.scene_type == kind and len(p.boxes) >= 2
        for q in (p.start, p.goal):
            assert world.within_limits(np.asarray(q))
            assert world.contacts(q) == [], (kind, seed)
        assert np.abs(np.subtract(p.goal, p.start)).max() > 0.2


def test_the_seed_chooses_among_the_scene_types(world: CollisionWorld) -> None:
    kinds = {generate_problem(s, SCENE_TYPES, world).scene_type for s in range(12)}
    assert len(kinds) >= 3


def test_joint_limits_are_pybullets(world: CollisionWorld) -> None:
    import pybullet as p

    limits = [p.getJointInfo(world.robot, j, physicsClientId=world.client)[8:10] for j in range(7)]
    assert [lo for lo, _ in limits] == list(JOINT_LOWER)
    assert [hi for _, hi in limits] == list(JOINT_UPPER)


def test_numpy_kinematics_match_pybullet(world: CollisionWorld) -> None:
    rng = np.random.default_rng(0)
    qs = rng.uniform(JOINT_LOWER, JOINT_UPPER, size=(4, 7))
    frames = chain().forward(qs)
    for i, q in enumerate(qs):
        for name, t in world.link_frames(q).items():
            np.testing.assert_allclose(frames[name][i], t, atol=1e-5, err_msg=name)
