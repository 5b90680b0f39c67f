"""A Step's or Reset's infos in the response region's info area, as the gRPC path splits them.

Which keys travel as columns and which as JSON is decided by
:func:`ale_robotics.infos.info_columns`, the same function the gRPC encoder uses, so
a client gets equal infos (values, dtypes, Python or numpy scalars) either way. Only
the bytes around them differ::

    0   u32 ncols, u32 desc_bytes, u32 data_bytes, u32 rest_bytes
    16  desc   JSON: [[key, dtype, value_shape, full_mask, python_scalars], ...]
        data   per column (8-byte aligned): its mask (num_envs bytes) unless full, its values
        rest   num_envs x (u32 length, UTF-8 JSON object), or nothing when every one is ""

The description is the same step after step for a given env (same keys, same
types), so the evaluator keeps the bytes of the last few and the client the parsed
form of the last few: a step costs a lookup, not a JSON round trip.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.infos import RawColumn, WireInfos, full_mask, info_columns

__all__ = ["InfoOverflow", "read_infos", "write_infos"]

_HEAD = struct.Struct("<IIII")
_LEN = struct.Struct("<I")
_CACHE = 64

Signature = tuple[tuple[str, str, tuple[int, ...], bool, bool], ...]
_descs: dict[Signature, bytes] = {}
_parsed: dict[bytes, list[tuple[str, np.dtype[Any], tuple[int, ...], bool, bool]]] = {}


class InfoOverflow(Exception):
    """The infos do not fit in the info area (``needed`` bytes)."""

    def __init__(self, needed: int, capacity: int) -> None:
        super().__init__(f"the infos take {needed} bytes, over the {capacity} bytes of the area")
        self.needed = needed
        self.capacity = capacity


def _pad(n: int) -> int:
    return (n + 7) & ~7


def _desc(columns: list[RawColumn]) -> bytes:
    sig: Signature = tuple(
        (key, values.dtype.str, values.shape[1:], mask is None, python)
        for key, values, mask, python in columns
    )
    desc = _descs.get(sig)
    if desc is None:
        desc = json.dumps([[k, d, list(s), f, p] for k, d, s, f, p in sig]).encode()
        if len(_descs) >= _CACHE:
            _descs.clear()
        _descs[sig] = desc
    return desc


def write_infos(area: memoryview, infos: Sequence[Mapping[str, Any]]) -> int:
    """Write ``infos`` (one per env) at the start of ``area``; the bytes used.

    InfoOverflow when they do not fit (nothing else is written then)."""
    columns, rest = info_columns(infos)
    desc = _desc(columns)
    chunks: list[bytes] = []
    for _, values, mask, _ in columns:
        if mask is not None:
            chunks.append(mask.tobytes().ljust(_pad(mask.nbytes), b"\0"))
        raw = values.tobytes()
        chunks.append(raw.ljust(_pad(len(raw)), b"\0"))
    data = b"".join(chunks)
    rest_bytes = b""
    if any(rest):
        rest_bytes = b"".join(_LEN.pack(len(b)) + b for b in (s.encode() for s in rest))
    start = _pad(_HEAD.size + len(desc))
    end = start + len(data) + len(rest_bytes)
    if end > len(area):
        raise InfoOverflow(end, len(area))
    _HEAD.pack_into(area, 0, len(columns), len(desc), len(data), len(rest_bytes))
    area[_HEAD.size : _HEAD.size + len(desc)] = desc
    area[start : start + len(data)] = data
    if rest_bytes:
        area[start + len(data) : end] = rest_bytes
    return end


def _parse(desc: bytes) -> list[tuple[str, np.dtype[Any], tuple[int, ...], bool, bool]]:
    parsed = _parsed.get(desc)
    if parsed is None:
        parsed = [
            (str(k), np.dtype(d), tuple(int(x) for x in s), bool(f), bool(p))
            for k, d, s, f, p in json.loads(desc)
        ]
        if len(_parsed) >= _CACHE:
            _parsed.clear()
        _parsed[desc] = parsed
    return parsed


def read_infos(area: memoryview, num_envs: int) -> WireInfos:
    """The infos the evaluator wrote at the start of ``area`` (copied out: the arrays stay
    valid after the next response overwrites the area)."""
    ncols, desc_len, data_len, rest_len = _HEAD.unpack_from(area, 0)
    desc = bytes(area[_HEAD.size : _HEAD.size + desc_len])
    start = _pad(_HEAD.size + desc_len)
    data = bytes(area[start : start + data_len])
    columns: list[tuple[str, npt.NDArray[Any], npt.NDArray[np.bool_], bool]] = []
    offset = 0
    for key, dtype, shape, full, python in _parse(desc):
        if full:
            mask = full_mask(num_envs)
        else:
            mask = np.frombuffer(data, np.bool_, num_envs, offset)
            offset += _pad(num_envs)
        count = num_envs * int(np.prod(shape, dtype=np.int64))
        values = np.frombuffer(data, dtype, count, offset).reshape(num_envs, *shape)
        offset += _pad(values.nbytes)
        columns.append((key, values, mask, python))
    if len(columns) != ncols:
        raise ValueError(f"info area: {ncols} columns announced, {len(columns)} described")
    rest = [""] * num_envs
    if rest_len:
        raw = bytes(area[start + data_len : start + data_len + rest_len])
        at = 0
        for i in range(num_envs):
            (n,) = _LEN.unpack_from(raw, at)
            rest[i] = raw[at + 4 : at + 4 + n].decode()
            at += 4 + n
    return WireInfos(columns, rest)
