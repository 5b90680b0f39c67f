"""Client-side pieces that need no server: spaces from specs, from_env, seed arguments."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from ale_robotics.client import RemoteEnv, RemoteVectorEnv, space_from_spec
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb


def _spec(
    low: np.ndarray | None, high: np.ndarray | None, dtype: int, shape: list[int]
) -> pb.TensorSpec:
    spec = pb.TensorSpec(name="x", dtype=dtype, shape=shape)
    if low is not None:
        spec.low.CopyFrom(to_tensor(low))
    if high is not None:
        spec.high.CopyFrom(to_tensor(high))
    return spec


def test_bounded_spec_becomes_the_same_box() -> None:
    low = np.array([-1.0, -np.inf], np.float32)
    high = np.array([1.0, np.inf], np.float32)
    box = space_from_spec(_spec(low, high, pb.DTYPE_FLOAT32, [2]))
    assert box == spaces.Box(low, high, (2,), np.float32)


def test_unbounded_specs_are_full_range_boxes() -> None:
    box = space_from_spec(_spec(None, None, pb.DTYPE_FLOAT64, [3]))
    assert box.dtype == np.float64 and np.isneginf(box.low).all() and np.isposinf(box.high).all()
    ints = space_from_spec(_spec(None, None, pb.DTYPE_INT32, [2]))
    assert ints.low[0] == np.iinfo(np.int32).min


@pytest.mark.parametrize(
    ("low", "high", "message"),
    [
        (np.zeros(2, np.float32), None, "only one of low and high"),
        (np.zeros(3, np.float32), np.ones(3, np.float32), "bounds of shape"),
        (np.ones(2, np.float32), np.zeros(2, np.float32), "low is above high"),
    ],
)
def test_inconsistent_specs_are_refused(
    low: np.ndarray, high: np.ndarray | None, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        space_from_spec(_spec(low, high, pb.DTYPE_FLOAT32, [2]))


@pytest.mark.parametrize("cls", [RemoteEnv, RemoteVectorEnv])
def test_from_env_says_what_is_missing(cls: type) -> None:
    with pytest.raises(InvalidArgumentError, match="ALE_ENDPOINT and ALE_TOKEN not set"):
        cls.from_env(env={})
