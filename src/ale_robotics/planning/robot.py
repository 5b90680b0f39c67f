"""The Franka Panda as shipped in ``pybullet_data``: joint limits, kinematics, link geometry.

Everything here is read from ``franka_panda/panda.urdf`` and its collision meshes,
so PyBullet (which the evaluator's validation uses) and the numpy kinematics
(which the EDMP-style generator uses for its costs) describe the same robot; a
test checks the numpy forward kinematics against PyBullet's link frames.

The arm has 7 revolute joints, all about their local z axis. The fingers are
held closed (0.0) throughout: planning is for the arm, and a fixed gripper keeps
start, goal and path in the same 7-dimensional configuration space.
"""

from __future__ import annotations

import functools
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = [
    "DOF",
    "JOINT_LOWER",
    "JOINT_UPPER",
    "LINK_BODY",
    "Chain",
    "chain",
    "link_vertices",
    "urdf_path",
]

DOF = 7
JOINT_LOWER: tuple[float, ...] = (-2.9671, -1.8326, -2.9671, -3.1416, -2.9671, -0.0873, -2.9671)
JOINT_UPPER: tuple[float, ...] = (2.9671, 1.8326, 2.9671, 0.0, 2.9671, 3.8223, 2.9671)
"""The URDF's hard limits (a test checks them against PyBullet's joint info)."""

LINK_NAMES: tuple[str, ...] = (
    "panda_link0",
    "panda_link1",
    "panda_link2",
    "panda_link3",
    "panda_link4",
    "panda_link5",
    "panda_link6",
    "panda_link7",
    "panda_hand",
    "panda_leftfinger",
    "panda_rightfinger",
)
"""Links with collision geometry, base first."""

LINK_BODY: dict[str, int] = {name: min(i, DOF) for i, name in enumerate(LINK_NAMES)}
"""Rigid body each link moves with: 0 the base, k the link after joint k; the hand and the
(held) fingers are rigid with link 7. Collision pairs are counted in these bodies."""

EE_LINK = "panda_grasptarget"


def urdf_path() -> Path:
    import pybullet_data

    return Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"


def _floats(text: str | None) -> list[float]:
    return [float(x) for x in (text or "0 0 0").split()]


def _origin(elem: ET.Element | None) -> npt.NDArray[np.float64]:
    """4x4 transform of a URDF ``<origin xyz rpy>`` (fixed-axis roll, pitch, yaw)."""
    xyz = _floats(None if elem is None else elem.get("xyz"))
    r, p, y = _floats(None if elem is None else elem.get("rpy"))
    cr, sr, cp, sp, cy, sy = (
        math.cos(r),
        math.sin(r),
        math.cos(p),
        math.sin(p),
        math.cos(y),
        math.sin(y),
    )
    t = np.eye(4)
    t[:3, :3] = [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ]
    t[:3, 3] = xyz
    return t


@dataclass(frozen=True)
class Chain:
    """The kinematic tree from the URDF: per link, its parent link, the fixed transform
    from the parent frame, and which arm joint (0-6, or None if fixed) turns about z."""

    parent: dict[str, str]
    offset: dict[str, npt.NDArray[np.float64]]
    joint: dict[str, int | None]
    order: tuple[str, ...]

    def forward(self, q: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        """World frames (N, 4, 4) of every link for configurations ``q`` (N, 7)."""
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        n = q.shape[0]
        frames: dict[str, npt.NDArray[np.float64]] = {}
        for link in self.order:
            base = np.broadcast_to(np.eye(4), (n, 4, 4)) if link not in self.parent else None
            t = base if base is not None else frames[self.parent[link]] @ self.offset[link]
            j = self.joint.get(link)
            if j is not None:
                c, s = np.cos(q[:, j]), np.sin(q[:, j])
                rz = np.zeros((n, 4, 4))
                rz[:, 0, 0], rz[:, 0, 1], rz[:, 1, 0], rz[:, 1, 1] = c, -s, s, c
                rz[:, 2, 2] = rz[:, 3, 3] = 1.0
                t = t @ rz
            frames[link] = np.array(t)
        return frames


@functools.cache
def chain() -> Chain:
    """The Panda's kinematic tree, parsed once per process."""
    root = ET.parse(urdf_path()).getroot()
    parent: dict[str, str] = {}
    offset: dict[str, npt.NDArray[np.float64]] = {}
    joint: dict[str, int | None] = {}
    arm = 0
    for j in root.iter("joint"):
        p_el, c_el = j.find("parent"), j.find("child")
        assert p_el is not None and c_el is not None
        child = c_el.get("link", "")
        parent[child] = p_el.get("link", "")
        offset[child] = _origin(j.find("origin"))
        if j.get("type") == "revolute":
            axis_el = j.find("axis")
            axis = _floats(None if axis_el is None else axis_el.get("xyz"))
            if axis != [0.0, 0.0, 1.0]:
                raise ValueError(f"joint {j.get('name')}: only z-axis joints are modelled")
            joint[child] = arm
            arm += 1
        else:
            joint[child] = None  # fixed, or a finger held at 0
    if arm != DOF:
        raise ValueError(f"{urdf_path()} has {arm} revolute joints, expected {DOF}")
    order: list[str] = []
    pending = ["panda_link0"]
    while pending:
        link = pending.pop(0)
        order.append(link)
        pending.extend(c for c, p in parent.items() if p == link)
    return Chain(parent, offset, joint, tuple(order))


@functools.cache
def link_vertices(link: str) -> npt.NDArray[np.float64]:
    """Collision-mesh vertices (M, 3) of ``link`` in the link frame."""
    root = ET.parse(urdf_path()).getroot()
    for el in root.iter("link"):
        if el.get("name") != link:
            continue
        col = el.find("collision")
        mesh = None if col is None else col.find("geometry/mesh")
        if col is None or mesh is None:
            break
        rel = mesh.get("filename", "").removeprefix("package://")
        verts = [
            [float(v) for v in line.split()[1:4]]
            for line in (urdf_path().parent / rel).read_text().splitlines()
            if line.startswith("v ")
        ]
        pts = np.asarray(verts, dtype=np.float64)
        t = _origin(col.find("origin"))
        return pts @ t[:3, :3].T + t[:3, 3]
    raise ValueError(f"link {link!r} has no collision mesh")
