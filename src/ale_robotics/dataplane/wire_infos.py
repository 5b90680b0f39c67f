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
form of the last few: a step costs a lookup, not a JSON round trip. The usual infos
of a simulator (each value a Python or numpy scalar, one type per key: MuJoCo's
reward terms and positions) take a shorter way on the evaluator: one ``struct``
packing of every value, by a plan kept per (envs, keys, types, which keys some envs
lack), with the same bytes :func:`~ale_robotics.infos.info_columns` would make (the
plan is made by its rule, :func:`~ale_robotics.infos.scalar_column`). Envs whose
episode just restarted carry their reset's infos, other keys than a step's: a
random-action 64-env Hopper session has some in 9 Steps of 10, and the general way's
per-env dict walk cost it 2.3 µs an env step, this packing 1.0 (in process). Anything else
(arrays, strings, a key of two types, an int past int64) goes the general way.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.infos import RawColumn, WireInfos, full_mask, info_columns, scalar_column

__all__ = ["InfoOverflow", "read_infos", "write_infos"]

_HEAD = struct.Struct("<IIII")
_LEN = struct.Struct("<I")
_CACHE = 64

Signature = tuple[tuple[str, str, tuple[int, ...], bool, bool], ...]
_descs: dict[Signature, bytes] = {}


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


_CODES = {
    np.dtype("<f8"): "d",
    np.dtype("<f4"): "f",
    np.dtype("<f2"): "e",
    np.dtype("<i8"): "q",
    np.dtype("<i4"): "i",
    np.dtype("u1"): "B",
    np.dtype("?"): "?",
}


class _Plan:
    """How to write infos of one shape (envs, keys, value types, which keys some envs lack)
    in one packing."""

    def __init__(self, ncols: int, desc: bytes, packer: struct.Struct) -> None:
        self.desc = desc
        self.start = _pad(_HEAD.size + len(desc))
        self.packer = packer
        self.head = _HEAD.pack(ncols, len(desc), packer.size, 0)


_PlanKey = tuple[int, tuple[tuple[str, type, bool], ...]]
"""``(envs, ((key, value type, masked), ...))``: what a plan depends on (not which envs)."""

_plans: dict[_PlanKey, _Plan | None] = {}


def _plan(n: int, columns: tuple[tuple[str, type, bool], ...]) -> _Plan | None:
    described: list[tuple[str, str, tuple[int, ...], bool, bool]] = []
    fmt: list[str] = []
    for key, kind, masked in columns:
        decided = scalar_column(key, kind)
        if decided is None or decided[0] not in _CODES:
            return None
        dtype, python = decided
        described.append((key, dtype.str, (), not masked, python))
        if masked:  # the mask's bytes first, as the general way lays a column out
            fmt.append(f"{n}?" + (f"{_pad(n) - n}x" if _pad(n) > n else ""))
        size = n * dtype.itemsize
        fmt.append(f"{n}{_CODES[dtype]}" + (f"{_pad(size) - size}x" if _pad(size) > size else ""))
    desc = json.dumps([[k, d, list(s), f, p] for k, d, s, f, p in described]).encode()
    return _Plan(len(described), desc, struct.Struct("<" + " ".join(fmt)))


def _write_fast(area: memoryview, infos: Sequence[Mapping[str, Any]]) -> int | None:
    """The usual infos in one packing (module doc); None when they are not that kind.

    Every env's info has the same keys (a Step in which no episode ended), or there
    are a few key sets (a Step in which some envs restarted: their reset's infos, or
    ``{}``, beside the others' step infos). Each key set's envs are found once; a key
    some envs lack becomes a masked column, its absent values 0, exactly the column
    :func:`~ale_robotics.infos.info_columns` makes (keys in order of first appearance,
    env by env). A key whose values are of more than one type goes the general way."""
    n = len(infos)
    keys = tuple(infos[0])
    groups: dict[tuple[str, ...], list[int]] | None = None
    for i in range(1, n):
        k = tuple(infos[i])
        if groups is None:
            if k == keys:
                continue
            groups = {keys: list(range(i))}
        members = groups.get(k)
        if members is None:
            groups[k] = [i]
        else:
            members.append(i)
    columns: list[tuple[str, type, bool]] = []
    values: list[Any] = []
    if groups is None:  # every column full
        for key in keys:
            column = [info[key] for info in infos]
            kinds = set(map(type, column))
            if len(kinds) != 1:
                return None
            columns.append((key, kinds.pop(), False))
            values += column
        return _pack(area, (n, tuple(columns)), values)
    having: dict[str, list[list[int]]] = {}
    for k, members in groups.items():  # in order of their first env: keys in order of
        for key in k:  # first appearance, env by env
            having.setdefault(key, []).append(members)
    for key, sets in having.items():
        mask: list[bool] = []
        if sum(map(len, sets)) == n:
            column = [info[key] for info in infos]
            kinds = set(map(type, column))
        else:
            kinds, mask, column = set(), [False] * n, [0] * n
            for members in sets:
                for i in members:
                    mask[i] = True
                    column[i] = value = infos[i][key]
                    kinds.add(type(value))
        if len(kinds) != 1:
            return None
        columns.append((key, kinds.pop(), bool(mask)))
        values += mask
        values += column
    return _pack(area, (n, tuple(columns)), values)


def _pack(area: memoryview, sig: _PlanKey, values: list[Any]) -> int | None:
    """``values`` (each column's mask, if it has one, then its values) by the plan of ``sig``."""
    plan = _plans.get(sig, _NO_PLAN)
    if plan is _NO_PLAN:
        if len(_plans) >= _CACHE:
            _plans.clear()
        plan = _plans[sig] = _plan(*sig)
    if plan is None:
        return None
    end = plan.start + plan.packer.size
    if end > len(area):
        return None  # the general way says by how much
    try:
        plan.packer.pack_into(area, plan.start, *values)
    except (struct.error, OverflowError):  # an int past int64: JSON, the general way
        return None
    area[: _HEAD.size] = plan.head
    area[_HEAD.size : _HEAD.size + len(plan.desc)] = plan.desc
    return end


_NO_PLAN = _Plan(0, b"", struct.Struct(""))


def write_infos(area: memoryview, infos: Sequence[Mapping[str, Any]]) -> int:
    """Write ``infos`` (one per env) at the start of ``area``; the bytes used.

    InfoOverflow when they do not fit (nothing else is written then)."""
    if infos and any(infos):
        used = _write_fast(area, infos)
        if used is not None:
            return used
    return _write_general(area, infos)


def _write_general(area: memoryview, infos: Sequence[Mapping[str, Any]]) -> int:
    """Any infos, by :func:`~ale_robotics.infos.info_columns` (what the gRPC path does)."""
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


# per column: key, dtype, (num_envs, *shape), count, mask offset (-1: full), values offset,
# python_scalars
_Read = tuple[str, np.dtype[Any], tuple[int, ...], int, int, int, bool]
_parsed: dict[tuple[bytes, int], list[_Read]] = {}


def _parse(desc: bytes, num_envs: int) -> list[_Read]:
    """Where each column lies in the data section (kept per description and env count)."""
    parsed = _parsed.get((desc, num_envs))
    if parsed is None:
        parsed = []
        offset = 0
        for k, d, s, f, p in json.loads(desc):
            dtype, shape = np.dtype(d), tuple(int(x) for x in s)
            mask_at = -1
            if not f:
                mask_at, offset = offset, offset + _pad(num_envs)
            count = num_envs * math.prod(shape)
            parsed.append((str(k), dtype, (num_envs, *shape), count, mask_at, offset, bool(p)))
            offset += _pad(count * dtype.itemsize)
        if len(_parsed) >= _CACHE:
            _parsed.clear()
        _parsed[(desc, num_envs)] = parsed
    return parsed


def read_infos(area: memoryview, num_envs: int) -> WireInfos:
    """The infos the evaluator wrote at the start of ``area`` (copied out: the arrays stay
    valid after the next response overwrites the area)."""
    ncols, desc_len, data_len, rest_len = _HEAD.unpack_from(area, 0)
    desc = bytes(area[_HEAD.size : _HEAD.size + desc_len])
    start = _pad(_HEAD.size + desc_len)
    data = bytes(area[start : start + data_len])
    columns: list[tuple[str, npt.NDArray[Any], npt.NDArray[np.bool_], bool]] = []
    full = full_mask(num_envs)
    for key, dtype, shape, count, mask_at, offset, python in _parse(desc, num_envs):
        mask = full if mask_at < 0 else np.frombuffer(data, np.bool_, num_envs, mask_at)
        values = np.frombuffer(data, dtype, count, offset).reshape(shape)
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
