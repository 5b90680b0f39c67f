"""Infos through the data plane's info area equal infos through gRPC, types included."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ale_robotics.dataplane import wire_infos
from ale_robotics.dataplane.wire_infos import InfoOverflow, _write_general, read_infos, write_infos
from ale_robotics.infos import decode_infos, encode_infos


class _Vec(gym.vector.VectorEnv):  # type: ignore[misc]
    """Only for Gymnasium's own ``_add_info`` (the vector layout of JSON entries)."""

    def __init__(self, n: int) -> None:
        self.num_envs = n


def _values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.floats(allow_nan=False, width=64),
        st.integers(-(2**70), 2**70),
        st.booleans(),
        st.floats(allow_nan=False, width=32).map(np.float32),
        st.floats(allow_nan=False, width=64).map(np.float64),
        st.integers(-(2**31), 2**31 - 1).map(np.int32),
        st.booleans().map(np.bool_),
        st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=2).map(np.array),
        st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=3).map(np.array),
        st.text(max_size=5),
        st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
    )


_infos = st.integers(1, 4).flatmap(
    lambda n: st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "success", "final_obs", "x_pos"]), _values()),
        min_size=n,
        max_size=n,
    )
)


def _same(x: Any, y: Any) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and np.array_equal(x, y)
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return bool(x == y)


@settings(max_examples=150, deadline=None)
@given(_infos)
def test_infos_equal_the_grpc_path(infos: list[dict[str, Any]]) -> None:
    area = memoryview(bytearray(1 << 16))
    used = write_infos(area, infos)
    assert 16 <= used <= len(area)
    got = read_infos(area, len(infos))
    want = decode_infos(*encode_infos(infos))
    mine, theirs = got.per_env(), want.per_env()
    assert all(_same(a, b) for a, b in zip(mine, theirs, strict=True)), (mine, theirs)
    vec = _Vec(len(infos))
    try:
        theirs_v = want.vector(vec._add_info)
    except Exception as exc:  # Gymnasium's _add_info cannot merge some mixes: nor can ours
        with pytest.raises(type(exc)):
            got.vector(vec._add_info)
        return
    mine_v = got.vector(vec._add_info)
    assert _same(mine_v, theirs_v) or _same_objects(mine_v, theirs_v)


def _same_objects(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """Vector layouts whose object arrays hold equal entries."""
    if x.keys() != y.keys():
        return False
    for key in x:
        a, b = x[key], y[key]
        if isinstance(a, dict):
            if not (isinstance(b, dict) and _same_objects(a, b)):
                return False
        elif a.dtype != b.dtype or a.shape != b.shape:
            return False
        elif a.dtype == object:
            if not all(_same(u, v) for u, v in zip(a.tolist(), b.tolist(), strict=True)):
                return False
        elif not np.array_equal(a, b):
            return False
    return True


def test_arrays_read_back_survive_the_next_write() -> None:
    area = memoryview(bytearray(4096))
    write_infos(area, [{"v": np.array([1.0, 2.0])}])
    first = read_infos(area, 1)
    write_infos(area, [{"v": np.array([3.0, 4.0])}])
    assert first.per_env()[0]["v"].tolist() == [1.0, 2.0]


def test_infos_past_the_area_are_refused_before_anything_is_written() -> None:
    area = memoryview(bytearray(256))
    area[:4] = b"keep"
    with pytest.raises(InfoOverflow) as caught:
        write_infos(area, [{"big": np.zeros(100)}])
    assert caught.value.needed > 256 and caught.value.capacity == 256
    assert bytes(area[:4]) == b"keep"


_SHAPES = (
    # a Hopper step's infos, its reset's, a bare {} (an idle eval env), another kind of key
    lambda r: {
        "x_position": np.float64(r.normal()),
        "z_distance_from_origin": np.float64(r.normal()),
        "x_velocity": np.float64(r.normal()),
        "reward_ctrl": np.float32(r.normal()),
        "reward_survive": float(r.integers(2)),
    },
    lambda r: {"x_position": np.float64(r.normal()), "z_distance_from_origin": np.float64(0.5)},
    lambda r: {},
    lambda r: {"success": bool(r.integers(2)), "steps": int(r.integers(-5, 5))},
    lambda r: {"z_distance_from_origin": np.float64(r.normal()), "x_position": np.float64(1)},
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(_SHAPES) - 1), min_size=1, max_size=70), st.integers(0, 99))
def test_infos_of_several_shapes_pack_to_the_general_ways_bytes(
    shapes: list[int], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    infos = [_SHAPES[k](rng) for k in shapes]
    fast, general = memoryview(bytearray(1 << 14)), memoryview(bytearray(1 << 14))
    used = write_infos(fast, infos)
    assert used == _write_general(general, infos)
    assert bytes(fast[:used]) == bytes(general[:used])


def test_a_step_with_restarted_envs_takes_the_packing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step infos beside reset infos and {} (a Step in which episodes restarted) never reach
    the general way's per-env walk."""
    rng = np.random.default_rng(0)
    infos = [_SHAPES[k](rng) for k in [1, 0, 0, 2, 0, 1, 0, 0]]

    def walked(*_: Any) -> Any:
        raise AssertionError("the general way")

    monkeypatch.setattr(wire_infos, "info_columns", walked)
    area = memoryview(bytearray(1 << 12))
    write_infos(area, infos)
    got = read_infos(area, len(infos)).per_env()
    assert all(_same(a, b) for a, b in zip(got, infos, strict=True))
    # a key of two types between shapes goes the general way (which refuses here)
    with pytest.raises(AssertionError, match="general way"):
        write_infos(area, [{"x_position": 1.0}, {"x_position": np.float64(2)}, {}])
