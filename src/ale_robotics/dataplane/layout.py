"""Where everything lies in a channel's two shared regions, computed the same way on both sides.

A channel has one request region (the client writes it) and one response region
(only the evaluator writes it). Each starts with a 64-byte header whose first word
is a sequence number: the writer fills the rest first and stores the sequence
number last, so a reader that sees a new number sees the whole message (x86's
stores become visible in order; elsewhere readers wait for the eventfd, whose
syscalls order memory, see :mod:`.wake`). Why one slot per direction and not a
deeper ring: Gymnasium's ``step`` is synchronous, so a client never has a second
request to send before the first is answered.

Request region::

    0   u64  seq        the client's count of requests, 1, 2, ... (written last)
    8   u32  op         OP_STEP, OP_RESET
    12  u32  flags      FLAG_FLOAT64: the action is float64 (else the action spec's dtype)
    16  u32  nseeds     Reset: seeds that follow (0, 1 or num_envs)
    20  u32  nmask      Reset: 0, or num_envs mask bytes
    64  action          [num_envs, *action_shape], room for float64
        seeds           num_envs x i64
        mask            num_envs x u8

Response region::

    0   u64  seq        the request's seq this answers (written last)
    8   u32  status     0, or the gRPC status code of the error (message in the info area)
    12  u32  op         the request's op
    16  i32  episodes_completed
    20  u8   eval_complete
    21  u8   seeds_ignored
    22  u8   closed     the evaluator ended the channel (no request is read any more)
    24  u32  info_bytes bytes of the info area in use (the error message's, on an error)
    64  observation     [num_envs, *obs_shape] in the observation dtype
        reward          num_envs x f64
        terminated      num_envs x u8
        truncated       num_envs x u8
        info area       the rest (:mod:`.wire_infos`)
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "FLAG_FLOAT64",
    "HEADER_BYTES",
    "LAYOUT_VERSION",
    "OP_RESET",
    "OP_STEP",
    "REQUEST_HEAD",
    "RESPONSE_HEAD",
    "Layout",
    "data_socket_name",
]

LAYOUT_VERSION = 1
"""Bumped whenever anything in this module's layout changes (OpenDataPlaneResponse says it)."""

HEADER_BYTES = 64
OP_STEP = 1
OP_RESET = 2
OPS = frozenset({OP_STEP, OP_RESET})
FLAG_FLOAT64 = 1

REQUEST_HEAD = struct.Struct("<IIII")
"""op, flags, nseeds, nmask: the request header after its seq (offset 8)."""

RESPONSE_HEAD = struct.Struct("<IIiBBBxI")
"""status, op, episodes_completed, eval_complete, seeds_ignored, closed, info_bytes (offset 8)."""

CLOSED_OFFSET = 22
"""The response header's ``closed`` byte, written on its own when a channel ends."""


def data_socket_name(agent_socket_name: str) -> str:
    """The data-plane socket's file name beside an agent socket of that name.

    A sandbox binds the agent socket's whole directory (bwrap at its host path, docker at
    ``/run/ale/agent``), so a socket beside it is reachable wherever the agent socket is.
    """
    return f"{agent_socket_name}.data"


def _align(n: int, to: int = 64) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True)
class Layout:
    """One channel's regions: sizes from the session's spaces, offsets derived from them."""

    num_envs: int
    obs_shape: tuple[int, ...]
    obs_dtype: str
    action_shape: tuple[int, ...]
    action_dtype: str
    response_bytes: int
    """The whole response region: the fixed arrays, then the info area up to this size."""
    version: int = LAYOUT_VERSION

    @classmethod
    def build(
        cls,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: np.dtype[Any],
        action_shape: tuple[int, ...],
        action_dtype: np.dtype[Any],
        max_response_bytes: int,
    ) -> Layout:
        """The layout of a session's channel; the info area gets what ``max_response_bytes``
        (the listener's max_message_bytes: the most a gRPC Step response may be) leaves."""
        probe = cls(
            num_envs,
            tuple(obs_shape),
            np.dtype(obs_dtype).str,
            tuple(action_shape),
            np.dtype(action_dtype).str,
            0,
        )
        size = max(max_response_bytes, probe.info_offset + 64 * 1024)
        return cls(
            probe.num_envs,
            probe.obs_shape,
            probe.obs_dtype,
            probe.action_shape,
            probe.action_dtype,
            _align(size, 4096),
        )

    # ------------------------------------------------------------- request --

    @property
    def action_count(self) -> int:
        return self.num_envs * math.prod(self.action_shape)

    @property
    def action_offset(self) -> int:
        return HEADER_BYTES

    @property
    def seeds_offset(self) -> int:
        return _align(self.action_offset + self.action_count * 8, 8)

    @property
    def mask_offset(self) -> int:
        return self.seeds_offset + self.num_envs * 8

    @property
    def request_bytes(self) -> int:
        return _align(self.mask_offset + self.num_envs, 4096)

    # ------------------------------------------------------------ response --

    @property
    def obs_count(self) -> int:
        return self.num_envs * math.prod(self.obs_shape)

    @property
    def obs_offset(self) -> int:
        return HEADER_BYTES

    @property
    def reward_offset(self) -> int:
        return _align(self.obs_offset + self.obs_count * np.dtype(self.obs_dtype).itemsize, 8)

    @property
    def terminated_offset(self) -> int:
        return self.reward_offset + self.num_envs * 8

    @property
    def truncated_offset(self) -> int:
        return self.terminated_offset + self.num_envs

    @property
    def info_offset(self) -> int:
        return _align(self.truncated_offset + self.num_envs, 64)

    @property
    def info_capacity(self) -> int:
        return self.response_bytes - self.info_offset

    # ---------------------------------------------------------------- wire --

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> Layout:
        """The evaluator's layout; ValueError when it is not one this client can use."""
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("version") != LAYOUT_VERSION:
            raise ValueError(
                f"data-plane layout version {raw.get('version')!r} is not {LAYOUT_VERSION}"
            )
        layout = cls(
            num_envs=int(raw["num_envs"]),
            obs_shape=tuple(int(d) for d in raw["obs_shape"]),
            obs_dtype=str(raw["obs_dtype"]),
            action_shape=tuple(int(d) for d in raw["action_shape"]),
            action_dtype=str(raw["action_dtype"]),
            response_bytes=int(raw["response_bytes"]),
        )
        if layout.num_envs < 1 or layout.info_capacity < 0:
            raise ValueError(f"data-plane layout is inconsistent: {raw}")
        return layout
