"""The Panda as spheres, with numpy kinematics and box distances, for gradient-based planning.

EDMP (like cuRobo and MπNets) represents the robot by spheres attached to its
links, so that the distance to an obstacle and its gradient are cheap and
smooth. The spheres here are fitted to the URDF's collision meshes: each
link's vertices are cut into slabs along their principal axis, one sphere per
slab, centred on the slab's bounding box and just large enough to hold its
vertices. The base link never moves and is left out.

This model only guides the generator; paths are judged by
:mod:`ale_robotics.planning.validate` on the real meshes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ale_robotics.planning.robot import DOF, LINK_BODY, LINK_NAMES, chain, link_vertices
from ale_robotics.planning.world import Box

__all__ = ["BoxSet", "SphereModel", "sphere_model"]

F64 = npt.NDArray[np.float64]
_SLAB_M = 0.08


@dataclass(frozen=True)
class SphereModel:
    links: tuple[str, ...]
    """Link of each sphere (S,)."""
    centers: F64
    """Centres in their link's frame (S, 3)."""
    radii: F64
    """(S,)"""
    moves_with: F64
    """(S, 7): 1.0 where joint j turns sphere s, else 0.0."""

    def positions(self, q: F64) -> tuple[F64, F64, F64]:
        """World sphere centres (N, S, 3) for ``q`` (N, 7), with each joint's world axis and
        origin (N, 7, 3) for :meth:`pullback`."""
        frames = chain().forward(q)
        n = q.shape[0]
        pos = np.empty((n, len(self.links), 3))
        for link in dict.fromkeys(self.links):
            idx = [i for i, name in enumerate(self.links) if name == link]
            t = frames[link]
            pos[:, idx] = (
                np.einsum("nij,sj->nsi", t[:, :3, :3], self.centers[idx]) + t[:, None, :3, 3]
            )
        joint_frames = np.stack([frames[f"panda_link{j + 1}"] for j in range(DOF)], axis=1)
        return pos, joint_frames[:, :, :3, 2], joint_frames[:, :, :3, 3]

    def pullback(self, pos: F64, axes: F64, origins: F64, grad_p: F64) -> F64:
        """d(cost)/dq (N, 7) from d(cost)/d(sphere centres) (N, S, 3).

        For a revolute joint with world axis z and origin o, a point p moves by
        z x (p - o) per radian, so the joint's share is
        z . sum_s((p_s - o) x g_s) over the spheres it moves; the sums are taken
        first, so no (N, S, 7, 3) Jacobian is built.
        """
        mask = self.moves_with
        moment = np.einsum("nsd,sj->njd", np.cross(pos, grad_p), mask)
        force = np.einsum("nsd,sj->njd", grad_p, mask)
        out: F64 = np.einsum("njd,njd->nj", axes, moment - np.cross(origins, force))
        return out


def _fit(vertices: F64) -> list[tuple[F64, float]]:
    centered = vertices - vertices.mean(axis=0)
    axis = np.linalg.svd(centered, full_matrices=False)[2][0]
    proj = centered @ axis
    lo, hi = float(proj.min()), float(proj.max())
    n = max(1, min(6, math.ceil((hi - lo) / _SLAB_M)))
    edges = np.linspace(lo, hi, n + 1)
    out = []
    for k in range(n):
        upper = proj <= edges[k + 1] if k == n - 1 else proj < edges[k + 1]
        pts = vertices[(proj >= edges[k]) & upper]
        if len(pts) == 0:
            continue
        center = (pts.min(axis=0) + pts.max(axis=0)) / 2
        out.append((center, float(np.linalg.norm(pts - center, axis=1).max())))
    return out


@functools.cache
def sphere_model() -> SphereModel:
    """The fitted model (computed once per process; deterministic)."""
    links: list[str] = []
    centers, radii, moves = [], [], []
    for link in LINK_NAMES[1:]:
        body = LINK_BODY[link]
        for center, radius in _fit(link_vertices(link)):
            links.append(link)
            centers.append(center)
            radii.append(radius)
            moves.append([1.0 if j < body else 0.0 for j in range(DOF)])
    return SphereModel(
        tuple(links), np.array(centers), np.array(radii), np.array(moves, dtype=np.float64)
    )


class BoxSet:
    """Penetration of spheres into a set of yaw-rotated boxes and the ground plane (z = 0).

    A broad phase (each box's bounding sphere) keeps the exact signed-distance
    computation to the few sphere-box pairs that can touch.
    """

    def __init__(self, boxes: Sequence[Box]) -> None:
        self.centers = np.array([b.center for b in boxes], dtype=np.float64).reshape(-1, 3)
        self.half = np.array([b.half_extents for b in boxes], dtype=np.float64).reshape(-1, 3)
        yaw = np.array([b.yaw for b in boxes], dtype=np.float64)
        self.cos, self.sin = np.cos(yaw), np.sin(yaw)
        self.bound = np.linalg.norm(self.half, axis=1)

    def signed_distance(self, points: F64, box: npt.NDArray[np.intp]) -> tuple[F64, F64]:
        """SDF of each point (P, 3) to its box (P,), and the SDF's gradient (P, 3)."""
        d = points - self.centers[box]
        c, s = self.cos[box], self.sin[box]
        local = np.stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1], d[:, 2]], -1)
        q = np.abs(local) - self.half[box]
        outside = np.maximum(q, 0.0)
        out_norm = np.linalg.norm(outside, axis=-1)
        qmax = q.max(axis=-1)
        sdf = out_norm + np.minimum(qmax, 0.0)
        grad_out = outside / np.maximum(out_norm, 1e-12)[:, None]
        grad_in = (q == qmax[:, None]).astype(np.float64)
        g = np.where((out_norm > 0)[:, None], grad_out, grad_in) * np.where(local >= 0, 1.0, -1.0)
        world = np.stack([c * g[:, 0] - s * g[:, 1], s * g[:, 0] + c * g[:, 1], g[:, 2]], -1)
        return sdf, world

    def penetrations(self, points: F64, radii: F64) -> tuple[npt.NDArray[np.intp], F64, F64]:
        """Pairs where a sphere (points (M, 3), radii (M,)) reaches into a box or the ground:
        (sphere index (P,), depth > 0 (P,), outward normal (P, 3)); a sphere may appear twice."""
        idx_list, depth_list, normal_list = [], [], []
        ground = radii - points[:, 2]
        hit = np.flatnonzero(ground > 0)
        idx_list.append(hit)
        depth_list.append(ground[hit])
        normal_list.append(np.tile([0.0, 0.0, 1.0], (len(hit), 1)))
        if len(self.centers):
            reach = np.linalg.norm(points[:, None, :] - self.centers[None], axis=-1)
            pi, bi = np.nonzero(reach < self.bound[None] + radii[:, None])
            sdf, grad = self.signed_distance(points[pi], bi)
            depth = radii[pi] - sdf
            keep = depth > 0
            idx_list.append(pi[keep])
            depth_list.append(depth[keep])
            normal_list.append(grad[keep])
        return np.concatenate(idx_list), np.concatenate(depth_list), np.concatenate(normal_list)
