"""Procedural planning problems in the style of the MπNets benchmark, from one seed.

Four scene families, as in Fishman et al. 2022 (Motion Policy Networks): a
tabletop with objects, a cubby (a shelf of compartments), a merged cubby (some
dividers removed) and a dresser with one drawer pulled out. Every obstacle is a
cuboid (MπNets also uses cylinders; cuboids keep the EDMP generator's distance
function exact). Each family is laid out in a local frame whose +x faces away
from the robot, then turned about the robot's base by a random yaw.

A problem is that scene plus a start and a goal configuration of the Panda. Each
is found by sampling a grasp-target pose in one of the scene's target regions
(inside a compartment pointing in, above a surface pointing down), solving
inverse kinematics from a random rest pose and keeping the answer only if it is
within the joint limits and collision-free (robot and scene, and self-collision)
in :class:`~ale_robotics.planning.world.CollisionWorld`. Start and goal come
from different regions where the scene has several.

**Determinism.** Everything is drawn from ``numpy.random.default_rng(seed)`` in
a fixed order, and PyBullet's IK and collision queries are pure functions of
their inputs, so the same seed gives the same problem on any host (a test checks
it). The seed is the evaluator's hidden episode seed: nothing else chooses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ale_robotics.planning.robot import DOF
from ale_robotics.planning.settings import SCENE_TYPES, SceneType
from ale_robotics.planning.world import Box, CollisionWorld

__all__ = ["SCENE_TYPES", "Problem", "SceneType", "generate_problem"]

_READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
_WALL = 0.02
_IK_TRIES = 12
_PAIR_TRIES = 6
_SCENE_TRIES = 20


@dataclass(frozen=True)
class Region:
    """Where a grasp target may be sampled: a box in a frame turned by ``yaw`` about world z,
    and the gripper's approach ('down', or horizontally along the frame's +x)."""

    center: tuple[float, float, float]
    half: tuple[float, float, float]
    yaw: float
    approach: Literal["down", "forward"]


@dataclass(frozen=True)
class Problem:
    """One planning problem: obstacles, and start and goal joint configurations."""

    scene_type: SceneType
    boxes: tuple[Box, ...]
    start: tuple[float, ...]
    goal: tuple[float, ...]


# ----------------------------------------------------------------- helpers --


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


def _turn(xyz: Sequence[float], yaw: float) -> tuple[float, float, float]:
    c, s = math.cos(yaw), math.sin(yaw)
    return (c * xyz[0] - s * xyz[1], s * xyz[0] + c * xyz[1], float(xyz[2]))


def _slab(lo: Sequence[float], hi: Sequence[float], yaw: float, extra_yaw: float = 0.0) -> Box:
    """A box spanning local-frame corners ``lo``..``hi``, placed in the world by ``yaw``."""
    center = [(a + b) / 2 for a, b in zip(lo, hi, strict=True)]
    half = tuple(abs(b - a) / 2 for a, b in zip(lo, hi, strict=True))
    return Box(_turn(center, yaw), (half[0], half[1], half[2]), yaw + extra_yaw)


def _region(lo: Sequence[float], hi: Sequence[float], yaw: float, approach: str) -> Region:
    center = [(a + b) / 2 for a, b in zip(lo, hi, strict=True)]
    half = tuple(max(0.0, (b - a) / 2) for a, b in zip(lo, hi, strict=True))
    return Region(_turn(center, yaw), (half[0], half[1], half[2]), yaw, approach)  # type: ignore[arg-type]


def _quat_from_matrix(r: npt.NDArray[np.float64]) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation matrix (Shepperd's method)."""
    tr = float(np.trace(r))
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        q = ((r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, s / 4)
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = math.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k]) * 2
        v = [0.0, 0.0, 0.0]
        v[i] = s / 4
        v[j] = (r[j, i] + r[i, j]) / s
        v[k] = (r[k, i] + r[i, k]) / s
        q = (v[0], v[1], v[2], (r[k, j] - r[j, k]) / s)
    return (float(q[0]), float(q[1]), float(q[2]), float(q[3]))


def _orientation(region: Region, roll: float) -> tuple[float, float, float, float]:
    """Gripper orientation: its z axis along the approach, turned by ``roll`` about it."""
    if region.approach == "down":
        z = np.array([0.0, 0.0, -1.0])
        x = np.array([math.cos(region.yaw + roll), math.sin(region.yaw + roll), 0.0])
    else:
        z = np.array([math.cos(region.yaw), math.sin(region.yaw), 0.0])
        side = np.array([-math.sin(region.yaw), math.cos(region.yaw), 0.0])
        x = math.cos(roll) * np.array([0.0, 0.0, -1.0]) + math.sin(roll) * side
    y = np.cross(z, x)
    return _quat_from_matrix(np.stack([x, y, z], axis=1))


# ------------------------------------------------------------------ scenes --


def _tabletop(rng: np.random.Generator) -> tuple[list[Box], list[Region]]:
    yaw = _u(rng, -0.4, 0.4)
    h, x0, depth, width = (
        _u(rng, 0.05, 0.25),
        _u(rng, 0.3, 0.42),
        _u(rng, 0.5, 0.8),
        _u(rng, 1.0, 1.6),
    )
    cy = _u(rng, -0.15, 0.15)
    boxes = [_slab((x0, cy - width / 2, 0.0), (x0 + depth, cy + width / 2, h), yaw)]
    x_hi = min(x0 + depth - 0.05, 0.75)
    for _ in range(int(rng.integers(2, 7))):
        hx, hy, hz = _u(rng, 0.02, 0.07), _u(rng, 0.02, 0.07), _u(rng, 0.03, 0.15)
        cx, cyo = _u(rng, x0 + 0.06, x_hi), _u(rng, -0.45, 0.45)
        spin = _u(rng, -math.pi, math.pi)
        center = _turn((cx, cyo, h + hz), yaw)
        boxes.append(Box(center, (hx, hy, hz), yaw + spin))
    regions = [
        _region((x0 + 0.05, -0.45, h + 0.1), (min(x0 + 0.4, 0.7), 0.0, h + 0.35), yaw, "down"),
        _region((x0 + 0.05, 0.0, h + 0.1), (min(x0 + 0.4, 0.7), 0.45, h + 0.35), yaw, "down"),
    ]
    return boxes, regions


def _cubby(rng: np.random.Generator, merged: bool) -> tuple[list[Box], list[Region]]:
    yaw = _u(rng, -0.6, 0.6)
    d, depth, width = _u(rng, 0.45, 0.6), _u(rng, 0.3, 0.42), _u(rng, 0.6, 0.95)
    height, z0 = _u(rng, 0.5, 0.75), _u(rng, 0.05, 0.3)
    rows, cols = 2, 3 if (merged and width >= 0.85) else 2
    x1, y0, z1 = d + depth, -width / 2, z0 + height
    boxes = [
        _slab((d, y0, 0.0), (x1, -y0, z0), yaw),  # plinth: nothing goes under the shelf
        _slab((x1 - _WALL, y0, z0), (x1, -y0, z1), yaw),  # back
        _slab((d, y0, z0), (x1, y0 + _WALL, z1), yaw),  # sides
        _slab((d, -y0 - _WALL, z0), (x1, -y0, z1), yaw),
        _slab((d, y0, z1 - _WALL), (x1, -y0, z1), yaw),  # top
    ]
    cw, ch = width / cols, height / rows
    segments: list[tuple[tuple[float, float, float], tuple[float, float, float]]] = []
    for r in range(1, rows):  # shelves, one segment per column
        z = z0 + r * ch
        for c in range(cols):
            segments.append(
                ((d, y0 + c * cw, z - _WALL / 2), (x1, y0 + (c + 1) * cw, z + _WALL / 2))
            )
    for c in range(1, cols):  # dividers, one segment per row
        y = y0 + c * cw
        for r in range(rows):
            segments.append(
                ((d, y - _WALL / 2, z0 + r * ch), (x1, y + _WALL / 2, z0 + (r + 1) * ch))
            )
    if merged:
        for _ in range(int(rng.integers(1, 3))):
            segments.pop(int(rng.integers(0, len(segments))))
    boxes.extend(_slab(lo, hi, yaw) for lo, hi in segments)
    regions = []
    for r in range(rows):
        for c in range(cols):
            yc, zc = y0 + (c + 0.5) * cw, z0 + (r + 0.5) * ch
            dy, dz = max(0.0, cw / 2 - 0.15), max(0.0, ch / 2 - 0.08)
            lo, hi = (d + 0.1, yc - dy, zc - dz), (d + 0.16, yc + dy, zc + dz)
            regions.append(_region(lo, hi, yaw, "forward"))
    return boxes, regions


def _dresser(rng: np.random.Generator) -> tuple[list[Box], list[Region]]:
    yaw = _u(rng, -0.5, 0.5)
    d, depth, width, height = (
        _u(rng, 0.45, 0.6),
        _u(rng, 0.35, 0.5),
        _u(rng, 0.55, 0.9),
        _u(rng, 0.3, 0.5),
    )
    rows, cols = (2, 1) if width < 0.7 else (2, 2)
    cw, ch = width / cols, height / rows
    r, c = int(rng.integers(0, rows)), int(rng.integers(0, cols))
    y0, x1 = -width / 2, d + depth
    ya, yb = y0 + c * cw + _WALL, y0 + (c + 1) * cw - _WALL
    za, zb = r * ch + _WALL, (r + 1) * ch - _WALL
    boxes = [
        _slab((d, y0, 0.0), (x1, -y0, za), yaw),  # below the open drawer's slot
        _slab((d, y0, zb), (x1, -y0, height), yaw),  # above it
        _slab((d, y0, za), (x1, ya, zb), yaw),  # either side of it
        _slab((d, yb, za), (x1, -y0, zb), yaw),
        _slab((x1 - _WALL, ya, za), (x1, yb, zb), yaw),  # back of the slot
    ]
    pulled = _u(rng, 0.2, 0.3)
    fx, bx = d - pulled, d - pulled + depth - 2 * _WALL  # drawer front and back
    wall_top = zb - 0.01
    boxes += [
        _slab((fx, ya + 0.005, za), (bx, yb - 0.005, za + _WALL), yaw),  # drawer bottom
        _slab((fx - _WALL, ya, za), (fx, yb, zb), yaw),  # front panel
        _slab((bx - _WALL, ya + 0.005, za), (bx, yb - 0.005, wall_top), yaw),
        _slab((fx, ya + 0.005, za), (bx, ya + 0.005 + _WALL, wall_top), yaw),
        _slab((fx, yb - 0.005 - _WALL, za), (bx, yb - 0.005, wall_top), yaw),
    ]
    regions = [
        _region((fx + 0.07, ya + 0.06, za + 0.12), (d - 0.04, yb - 0.06, zb + 0.15), yaw, "down"),
        _region(
            (d + 0.08, y0 + 0.08, height + 0.1), (x1 - 0.1, -y0 - 0.08, height + 0.3), yaw, "down"
        ),
    ]
    return boxes, regions


def _build(kind: SceneType, rng: np.random.Generator) -> tuple[list[Box], list[Region]]:
    if kind == "tabletop":
        return _tabletop(rng)
    if kind == "dresser":
        return _dresser(rng)
    return _cubby(rng, merged=kind == "merged_cubby")


# ---------------------------------------------------------------- problems --


def _sample_config(
    world: CollisionWorld, region: Region, rng: np.random.Generator
) -> npt.NDArray[np.float64] | None:
    for _ in range(_IK_TRIES):
        local = [float(rng.uniform(-h, h)) if h > 0 else 0.0 for h in region.half]
        offset = _turn(local, region.yaw)
        pos = [region.center[i] + offset[i] for i in range(3)]
        orn = _orientation(region, _u(rng, -0.4, 0.4))
        rest = np.clip(_READY + rng.normal(0.0, 0.4, DOF), world.limits_low, world.limits_high)
        q = world.inverse_kinematics(pos, orn, rest)
        if q is not None and not world.in_collision(q):
            return q
    return None


def generate_problem(seed: int, scene_types: Sequence[SceneType], world: CollisionWorld) -> Problem:
    """The problem of ``seed``: a scene of one of ``scene_types`` with a start and a goal.

    Leaves ``world`` holding the problem's scene. Raises RuntimeError if no
    valid problem is found in a bounded number of attempts (never seen; it
    would be a bug in the scene layouts, not bad luck worth hiding).
    """
    if not scene_types:
        raise ValueError("scene_types is empty")
    rng = np.random.default_rng(seed)
    kind = scene_types[int(rng.integers(0, len(scene_types)))]
    for _ in range(_SCENE_TRIES):
        boxes, regions = _build(kind, rng)
        world.set_scene(boxes)
        for _ in range(_PAIR_TRIES):
            if len(regions) > 1:
                a, b = rng.choice(len(regions), size=2, replace=False)
            else:
                a = b = 0
            start = _sample_config(world, regions[int(a)], rng)
            goal = None if start is None else _sample_config(world, regions[int(b)], rng)
            if start is not None and goal is not None and np.abs(goal - start).max() > 0.2:
                return Problem(
                    kind,
                    tuple(boxes),
                    tuple(float(v) for v in start),
                    tuple(float(v) for v in goal),
                )
    raise RuntimeError(f"no valid {kind} problem found for this seed")
