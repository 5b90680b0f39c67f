"""Infos on the wire: the columns + JSON split must give back exactly what the envs returned.

The reference for the vector layout is Gymnasium's own ``VectorEnv._add_info``
applied to the original per-env dicts (what ``SyncVectorEnv`` would return).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.vector import VectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from ale_robotics.infos import decode_infos, encode_infos
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb


class _Vec(VectorEnv[Any, Any, Any]):
    """Just enough of a VectorEnv to call Gymnasium's ``_add_info``."""

    def __init__(self, n: int) -> None:
        self.num_envs = n


def _gymnasium_vector(infos: list[dict[str, Any]]) -> dict[str, Any]:
    vec = _Vec(len(infos))
    out: dict[str, Any] = {}
    for i, info in enumerate(infos):
        if info:
            out = vec._add_info(out, info, i)
    return out


def _roundtrip(infos: list[dict[str, Any]]) -> Any:
    columns, rest = encode_infos(infos)
    wire = pb.StepResponse(info_columns=columns, info_json=rest)
    wire = pb.StepResponse.FromString(wire.SerializeToString())
    return decode_infos(wire.info_columns, wire.info_json)


def _assert_same_vector(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, dict):
            _assert_same_vector(got[key], value)
            continue
        assert got[key].dtype == value.dtype, key
        assert got[key].shape == value.shape, key
        assert np.array_equal(got[key], value, equal_nan=value.dtype.kind == "f"), key


MIXED: list[dict[str, Any]] = [
    {
        "reward_ctrl": -0.25,
        "success": True,
        "steps": 3,
        "dist": np.float32(0.5),
        "pos": np.array([1.0, 2.0, 3.0]),
        "label": "grasp",
        "nested": {"a": 1.0},
        "ragged": np.arange(2),
        "huge": 2**70,
        "mixed": 1,
    },
    {},
    {
        "reward_ctrl": -0.5,
        "success": False,
        "steps": 4,
        "dist": np.float32(1.5),
        "pos": np.array([4.0, 5.0, 6.0]),
        "ragged": np.arange(3),
        "mixed": 2.5,
    },
]


def test_numeric_keys_travel_as_columns_the_rest_as_json() -> None:
    columns, rest = encode_infos(MIXED)
    assert {c.key for c in columns} == {"reward_ctrl", "success", "steps", "dist", "pos"}
    assert rest[1] == ""
    for key in ("label", "nested", "ragged", "huge", "mixed"):
        assert key in rest[0]
    for key in ("reward_ctrl", "success", "pos"):
        assert key not in rest[0] and key not in rest[2]


def test_per_env_infos_come_back_with_their_types() -> None:
    back = _roundtrip(MIXED).per_env()
    assert back[1] == {}
    for got, want in zip(back, MIXED, strict=True):
        assert got.keys() == want.keys()
    first = back[0]
    assert first["reward_ctrl"] == -0.25 and type(first["reward_ctrl"]) is float
    assert first["success"] is True
    assert first["steps"] == 3 and type(first["steps"]) is int
    assert type(first["dist"]) is np.float32 and first["dist"] == np.float32(0.5)
    assert isinstance(first["pos"], np.ndarray) and first["pos"].tolist() == [1.0, 2.0, 3.0]
    first["pos"][0] = 9.0  # writable, and not a view shared with env 2
    assert back[2]["pos"].tolist() == [4.0, 5.0, 6.0]
    assert first["huge"] == 2**70  # exact, through JSON
    assert first["label"] == "grasp" and first["nested"] == {"a": 1.0}
    assert first["ragged"] == [0, 1]  # ragged arrays are lists, as JSON has them


def test_vector_layout_is_gymnasiums() -> None:
    # Gymnasium itself cannot batch ragged arrays or ints past int64
    infos = [{k: v for k, v in i.items() if k not in ("ragged", "huge")} for i in MIXED]
    want = _gymnasium_vector(infos)
    _assert_same_vector(_roundtrip(infos).vector(_Vec(3)._add_info), want)
    # float32 keeps its dtype, as in SyncVectorEnv (JSON would have made it float64)
    assert want["dist"].dtype == np.float32


def test_empty_infos_send_nothing() -> None:
    columns, rest = encode_infos([{}, {}])
    assert columns == [] and rest == ["", ""]
    assert _roundtrip([{}, {}]).vector(_Vec(2)._add_info) == {}


def test_final_obs_keeps_gymnasiums_object_layout() -> None:
    infos = [{"final_obs": np.zeros(2)}, {"final_obs": np.ones(2)}]
    columns, _ = encode_infos(infos)
    assert columns == []


def test_a_malformed_column_is_a_clear_error() -> None:
    bad = pb.InfoColumn(
        key="x", values=to_tensor(np.zeros(3)), mask=to_tensor(np.ones(2, dtype=bool))
    )
    with pytest.raises(ValueError, match="malformed info column 'x'"):
        decode_infos([bad], ["", ""])
    not_bool = pb.InfoColumn(key="y", values=to_tensor(np.zeros(2)), mask=to_tensor(np.ones(2)))
    with pytest.raises(ValueError, match="malformed info column 'y'"):
        decode_infos([not_bool], ["", ""])
    # a full mask's bytes in the wrong shape: not taken for a full mask
    flat = pb.Tensor(dtype=pb.DTYPE_BOOL, shape=[1, 2], data=b"\x01\x01")
    wrong_shape = pb.InfoColumn(key="z", values=to_tensor(np.zeros(2)), mask=flat)
    with pytest.raises(ValueError, match="malformed info column 'z'"):
        decode_infos([wrong_shape], ["", ""])


def test_a_full_column_decodes_into_values_of_each_env_own() -> None:
    """Every env has the key (the usual case, decoded without its mask): each env's value
    is its own, and the vector layout's mask a writable array of its own."""
    infos = [{"x": np.float64(i), "pos": np.full(2, float(i))} for i in range(3)]
    wire = _roundtrip(infos)
    per_env = wire.per_env()
    assert [type(i["x"]) for i in per_env] == [np.float64] * 3
    per_env[0]["pos"][0] = 9.0
    assert per_env[1]["pos"].tolist() == [1.0, 1.0] and wire.per_env()[0]["pos"][0] == 0.0
    vector = wire.vector(_Vec(3)._add_info)
    vector["_x"][0] = False  # the caller's to change
    assert wire.vector(_Vec(3)._add_info)["_x"].all()


_scalars = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(width=32).map(np.float32),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.text(max_size=3),
)
_values = st.one_of(
    _scalars,
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=3).map(np.asarray),
    st.dictionaries(st.sampled_from("pq"), st.floats(-10, 10), max_size=2),
)
_infos = st.lists(
    st.dictionaries(st.sampled_from(["a", "b", "c", "success"]), _values, max_size=4),
    min_size=1,
    max_size=5,
)


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    """What JSON would have given (numpy values as Python values and lists)."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        out[k] = v.tolist() if isinstance(v, np.generic | np.ndarray) else v
    return out


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_infos)
def test_any_infos_round_trip(infos: list[dict[str, Any]]) -> None:
    wire = _roundtrip(infos)
    back = wire.per_env()
    for got, want in zip(back, infos, strict=True):
        assert got.keys() == want.keys()
        for k, v in want.items():
            g = got[k]
            if isinstance(g, np.generic | np.ndarray):
                assert g.dtype == np.asarray(v).dtype and g.shape == np.shape(v)
                assert np.array_equal(g, v, equal_nan=True)
            elif isinstance(v, float | np.floating) and v != v:
                assert g != g  # NaN (a numpy NaN sent as JSON comes back a Python NaN)
            else:
                assert _jsonable({k: g}) == _jsonable({k: v})
    # Where each key has one dtype and shape in every env (what real envs return) and
    # Gymnasium can build a vector layout at all, ours is the same, dtypes included.
    if not _one_dtype_per_key(infos):
        return
    try:
        want_vec = _gymnasium_vector(infos)
    except (ValueError, TypeError, OverflowError):
        return
    _assert_same_vector(wire.vector(_Vec(len(infos))._add_info), want_vec)


def _one_dtype_per_key(infos: list[dict[str, Any]]) -> bool:
    seen: dict[str, tuple[Any, ...]] = {}
    for info in infos:
        for k, v in info.items():
            if isinstance(v, dict | str):
                sig: tuple[Any, ...] = (type(v),)
            else:
                arr = np.asarray(v)
                sig = (arr.dtype, arr.shape, isinstance(v, np.ndarray))
            if seen.setdefault(k, sig) != sig:
                return False
    return True


def test_mixed_widths_go_to_json_whole() -> None:
    infos = [{"d": np.float32(1.5)}, {"d": 2.5}]
    columns, rest = encode_infos(infos)
    assert columns == [] and all(rest)
    assert _roundtrip(infos).per_env() == [{"d": 1.5}, {"d": 2.5}]


def test_python_and_numpy_values_of_one_dtype_share_a_column() -> None:
    infos = [{"d": np.float64(1.5)}, {"d": 2.5}, {}]
    columns, _ = encode_infos(infos)
    assert [c.key for c in columns] == ["d"] and not columns[0].python_scalars
    _assert_same_vector(_roundtrip(infos).vector(_Vec(3)._add_info), _gymnasium_vector(infos))
