from __future__ import annotations

import numpy as np
import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.tensors import from_tensor, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "int32", "int64", "uint8", "bool", "float16"]
)
def test_round_trip(dtype: str) -> None:
    a = (np.arange(24).reshape(2, 3, 4) % 2).astype(dtype)
    b = from_tensor(to_tensor(a))
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)


def test_bytes_are_little_endian_row_major() -> None:
    t = to_tensor(np.array([[1, 2]], dtype=">i4"))
    assert t.data == b"\x01\x00\x00\x00\x02\x00\x00\x00"
    assert list(t.shape) == [1, 2]


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (pb.Tensor(dtype=pb.DTYPE_FLOAT32, shape=[3], data=b"\x00" * 8), "expected 12"),
        (pb.Tensor(dtype=99, shape=[1], data=b"\x00"), "unknown tensor dtype"),
        (pb.Tensor(dtype=pb.DTYPE_FLOAT32, shape=[-1], data=b""), "negative dimension"),
        (pb.Tensor(dtype=pb.DTYPE_UINT8, shape=[1 << 20, 1 << 20], data=b""), "too many"),
    ],
)
def test_bad_tensors_are_invalid_argument(tensor: pb.Tensor, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        from_tensor(tensor, "action")
