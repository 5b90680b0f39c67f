"""Convert between numpy arrays and ``ale_robotics.v1.Tensor`` (raw little-endian bytes).

Decoding is the trust boundary for every tensor a client sends, so it checks the
dtype enum, the shape and the byte length before touching the bytes, and raises
:class:`~ale_robotics.errors.InvalidArgumentError` with what to fix.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import numpy.typing as npt

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["MAX_TENSOR_ELEMENTS", "from_tensor", "numpy_dtype", "proto_dtype", "to_tensor"]

MAX_TENSOR_ELEMENTS = 1 << 28
"""Refuse shapes past this many elements before allocating anything."""

_TO_NP: dict[pb.DType, np.dtype[np.generic]] = {
    pb.DTYPE_FLOAT32: np.dtype("<f4"),
    pb.DTYPE_FLOAT64: np.dtype("<f8"),
    pb.DTYPE_INT32: np.dtype("<i4"),
    pb.DTYPE_INT64: np.dtype("<i8"),
    pb.DTYPE_UINT8: np.dtype("u1"),
    pb.DTYPE_BOOL: np.dtype("?"),
    pb.DTYPE_FLOAT16: np.dtype("<f2"),
}
_FROM_NP: dict[np.dtype[np.generic], pb.DType] = {dt: code for code, dt in _TO_NP.items()}


def proto_dtype(dtype: npt.DTypeLike) -> pb.DType:
    dt = np.dtype(dtype)
    code = _FROM_NP.get(dt)  # keyed by dtype, not .name: that property is slow Python
    if code is None:
        code = _FROM_NP.get(dt.newbyteorder("<"))  # big-endian input: to_tensor swaps it
    if code is None:
        raise InvalidArgumentError(f"dtype {dt.name} cannot travel as a Tensor")
    return code


def numpy_dtype(code: int) -> np.dtype[np.generic]:
    dtype = _TO_NP.get(cast("pb.DType", code))
    if dtype is None:
        raise InvalidArgumentError(f"unknown tensor dtype enum {code}; use one of {sorted(_TO_NP)}")
    return dtype


def to_tensor(array: npt.ArrayLike) -> pb.Tensor:
    arr = np.asarray(array)
    code = proto_dtype(arr.dtype)
    le = np.ascontiguousarray(arr, dtype=_TO_NP[code])
    return pb.Tensor(dtype=code, shape=list(arr.shape), data=le.tobytes())


def from_tensor(t: pb.Tensor, what: str = "tensor") -> npt.NDArray[np.generic]:
    dtype = numpy_dtype(t.dtype)
    shape = tuple(t.shape)  # int64 fields arrive as Python ints
    if shape and min(shape) < 0:
        raise InvalidArgumentError(f"{what}: negative dimension in shape {list(shape)}")
    count = math.prod(shape)
    if count > MAX_TENSOR_ELEMENTS:
        raise InvalidArgumentError(f"{what}: shape {list(shape)} has too many elements")
    expected = count * dtype.itemsize
    if len(t.data) != expected:
        raise InvalidArgumentError(
            f"{what}: {len(t.data)} data bytes for shape {list(shape)} and dtype {dtype.name}; "
            f"expected {expected}"
        )
    return np.frombuffer(t.data, dtype=dtype).reshape(shape)
