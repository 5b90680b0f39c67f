"""A PyBullet DIRECT-mode world for one process: the Panda, a ground plane and a scene's boxes.

Collision checking is what both planning tasks trust, so it is done one way
only, here: joints are set with ``resetJointState`` (no dynamics, nothing is
stepped), Bullet's collision detection runs once, and any contact of the robot
with penetration depth below zero counts, with the scene or with itself.

Self-collision pairs: the links' collision geometry is the convex hull of each
mesh, so links close in the chain overlap at ordinary configurations (the wrist
at q6 near 0, the closed fingers with each other). Pairs of links at most two
revolute joints apart in the chain (:data:`~ale_robotics.planning.robot.LINK_BODY`)
are therefore not checked, the usual "adjacent links" rule of an SRDF; every
other pair is. The base never checks against the ground it stands on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.planning.robot import DOF, EE_LINK, JOINT_LOWER, JOINT_UPPER, LINK_BODY
from ale_robotics.planning.robot import urdf_path as _urdf_path

__all__ = ["GROUND_HALF_THICKNESS", "Box", "CollisionWorld", "Config", "yaw_quaternion"]

Config = Sequence[float] | npt.NDArray[np.float64]
"""A joint configuration of the arm (7 values)."""

GROUND_HALF_THICKNESS = 0.05
_SELF_HOPS = 2


@dataclass(frozen=True)
class Box:
    """A static cuboid obstacle: centre (m), half extents (m), rotation about world z (rad)."""

    center: tuple[float, float, float]
    half_extents: tuple[float, float, float]
    yaw: float = 0.0


def yaw_quaternion(yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation by ``yaw`` about world z (PyBullet's order)."""
    return (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))


class CollisionWorld:
    """One PyBullet client with the Panda loaded once; scenes are swapped in and out."""

    def __init__(self) -> None:
        import pybullet as p

        self._p: Any = p
        self.client = p.connect(p.DIRECT)
        flags = p.URDF_USE_SELF_COLLISION | p.URDF_USE_SELF_COLLISION_EXCLUDE_PARENT
        self.robot = p.loadURDF(
            str(_urdf_path()),
            [0, 0, 0],
            useFixedBase=True,
            flags=flags,
            physicsClientId=self.client,
        )
        self._links: dict[str, int] = {}
        self._movable: list[int] = []
        for j in range(p.getNumJoints(self.robot, physicsClientId=self.client)):
            info = p.getJointInfo(self.robot, j, physicsClientId=self.client)
            self._links[info[12].decode()] = j
            if info[2] == p.JOINT_REVOLUTE:
                self._movable.append(j)
            elif info[2] == p.JOINT_PRISMATIC:
                p.resetJointState(self.robot, j, 0.0, physicsClientId=self.client)
        if len(self._movable) != DOF:
            raise RuntimeError(f"expected {DOF} revolute joints, found {len(self._movable)}")
        self._links["panda_link0"] = -1
        self._disable_near_pairs()
        ground = p.createCollisionShape(
            p.GEOM_BOX, halfExtents=[3, 3, GROUND_HALF_THICKNESS], physicsClientId=self.client
        )
        self.ground = p.createMultiBody(
            0, ground, basePosition=[0, 0, -GROUND_HALF_THICKNESS], physicsClientId=self.client
        )
        p.setCollisionFilterPair(self.robot, self.ground, -1, -1, 0, physicsClientId=self.client)
        self._boxes: list[int] = []
        self.limits_low = np.asarray(JOINT_LOWER)
        self.limits_high = np.asarray(JOINT_UPPER)

    def _disable_near_pairs(self) -> None:
        names = [n for n in LINK_BODY if n in self._links]
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if abs(LINK_BODY[a] - LINK_BODY[b]) <= _SELF_HOPS:
                    self._p.setCollisionFilterPair(
                        self.robot,
                        self.robot,
                        self._links[a],
                        self._links[b],
                        0,
                        physicsClientId=self.client,
                    )

    def close(self) -> None:
        self._p.disconnect(physicsClientId=self.client)

    def __enter__(self) -> CollisionWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- scene --

    def set_scene(self, boxes: Sequence[Box]) -> None:
        """Replace the obstacles (the robot and the ground stay)."""
        p = self._p
        for body in self._boxes:
            p.removeBody(body, physicsClientId=self.client)
        self._boxes = []
        for box in boxes:
            shape = p.createCollisionShape(
                p.GEOM_BOX, halfExtents=list(box.half_extents), physicsClientId=self.client
            )
            self._boxes.append(
                p.createMultiBody(
                    0,
                    shape,
                    basePosition=list(box.center),
                    baseOrientation=yaw_quaternion(box.yaw),
                    physicsClientId=self.client,
                )
            )

    # ------------------------------------------------------------ checking --

    def set_joints(self, q: Config) -> None:
        for j, v in zip(self._movable, q, strict=True):
            self._p.resetJointState(self.robot, j, float(v), physicsClientId=self.client)

    def contacts(self, q: Config) -> list[tuple[str, str]]:
        """(robot link, what it touches) for every penetrating contact at ``q``."""
        p = self._p
        self.set_joints(q)
        p.performCollisionDetection(physicsClientId=self.client)
        names = {v: k for k, v in self._links.items()}
        out = []
        for c in p.getContactPoints(bodyA=self.robot, physicsClientId=self.client):
            if c[8] >= 0.0:
                continue
            other = (
                names.get(c[4], str(c[4]))
                if c[2] == self.robot
                else ("ground" if c[2] == self.ground else "obstacle")
            )
            out.append((names.get(c[3], str(c[3])), other))
        return out

    def in_collision(self, q: Config) -> bool:
        p = self._p
        self.set_joints(q)
        p.performCollisionDetection(physicsClientId=self.client)
        return any(
            c[8] < 0.0 for c in p.getContactPoints(bodyA=self.robot, physicsClientId=self.client)
        )

    def within_limits(self, q: npt.NDArray[np.float64], tol: float = 1e-9) -> bool:
        return bool(np.all(q >= self.limits_low - tol) and np.all(q <= self.limits_high + tol))

    # ---------------------------------------------------------- kinematics --

    def ee_pose(self, q: Config) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Grasp-target position and (x, y, z, w) quaternion at ``q``."""
        self.set_joints(q)
        state = self._p.getLinkState(
            self.robot,
            self._links[EE_LINK],
            computeForwardKinematics=True,
            physicsClientId=self.client,
        )
        return np.asarray(state[4]), np.asarray(state[5])

    def link_frames(self, q: Config) -> dict[str, npt.NDArray[np.float64]]:
        """World 4x4 frames of every link (for checking the numpy kinematics)."""
        p = self._p
        self.set_joints(q)
        out = {}
        for name, j in self._links.items():
            t = np.eye(4)
            if j < 0:  # the base is fixed at the origin (PyBullet reports its inertial frame)
                out[name] = t
                continue
            s = p.getLinkState(
                self.robot, j, computeForwardKinematics=True, physicsClientId=self.client
            )
            pos, orn = s[4], s[5]
            t[:3, :3] = np.asarray(p.getMatrixFromQuaternion(orn)).reshape(3, 3)
            t[:3, 3] = pos
            out[name] = t
        return out

    def inverse_kinematics(
        self,
        position: Sequence[float],
        orientation: Sequence[float],
        rest: Config,
        *,
        iterations: int = 4,
        pos_tol: float = 0.01,
        ang_tol: float = 0.05,
    ) -> npt.NDArray[np.float64] | None:
        """A configuration within limits putting the grasp target at the pose, or None.

        PyBullet's damped least squares with ``rest`` as the null-space preference
        (different rest poses reach different IK branches), re-seeded from its own
        answer a few times; deterministic for the same inputs.
        """
        p = self._p
        low, high = [*JOINT_LOWER, 0.0, 0.0], [*JOINT_UPPER, 0.04, 0.04]
        ranges = [h - lo for lo, h in zip(low, high, strict=True)]
        q = np.asarray(rest, dtype=np.float64)
        self.set_joints(q)
        for _ in range(iterations):
            sol = p.calculateInverseKinematics(
                self.robot,
                self._links[EE_LINK],
                list(position),
                list(orientation),
                lowerLimits=low,
                upperLimits=high,
                jointRanges=ranges,
                restPoses=[*list(rest), 0.0, 0.0],
                maxNumIterations=200,
                residualThreshold=1e-5,
                physicsClientId=self.client,
            )
            q = np.asarray(sol[:DOF], dtype=np.float64)
            self.set_joints(q)
        if not self.within_limits(q):
            return None
        pos, orn = self.ee_pose(q)
        dot = abs(float(np.dot(orn, np.asarray(orientation))))
        angle = 2.0 * math.acos(min(1.0, dot))
        if float(np.linalg.norm(pos - np.asarray(position))) > pos_tol or angle > ang_tol:
            return None
        return q
