"""Gymnasium spaces from the protocol's ``TensorSpec`` (dtype, shape, bounds).

A spec with bounds becomes a ``Box`` with exactly those bounds (±inf allowed),
so ``space.contains`` on the client agrees with the server's own checks; a
numeric spec without bounds is an unbounded ``Box``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.tensors import from_tensor, numpy_dtype
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["space_from_spec"]


def space_from_spec(spec: pb.TensorSpec) -> Any:
    """A ``gymnasium.spaces.Box`` for ``spec``; INVALID_ARGUMENT for bounds that disagree."""
    from gymnasium import spaces

    dtype = numpy_dtype(spec.dtype)
    shape = tuple(int(d) for d in spec.shape)
    if dtype.kind not in "fiub":
        raise InvalidArgumentError(f"spec {spec.name!r}: dtype {dtype.name} has no space")
    if spec.HasField("low") != spec.HasField("high"):
        raise InvalidArgumentError(f"spec {spec.name!r} has only one of low and high")
    if dtype.kind == "b":
        return spaces.MultiBinary(list(shape)) if shape else spaces.Discrete(2)
    if spec.HasField("low"):
        low = from_tensor(spec.low, f"{spec.name}.low").astype(dtype)
        high = from_tensor(spec.high, f"{spec.name}.high").astype(dtype)
        if low.shape != shape or high.shape != shape:
            raise InvalidArgumentError(
                f"spec {spec.name!r}: bounds of shape {list(low.shape)}/{list(high.shape)} "
                f"for a tensor of shape {list(shape)}"
            )
        if np.any(low > high):
            raise InvalidArgumentError(f"spec {spec.name!r}: low is above high somewhere")
    elif dtype.kind == "f":
        low = np.full(shape, -np.inf, dtype=dtype)
        high = np.full(shape, np.inf, dtype=dtype)
    else:
        info = np.iinfo(dtype.type)  # type: ignore[type-var]
        low = np.full(shape, info.min, dtype=dtype)
        high = np.full(shape, info.max, dtype=dtype)
    return spaces.Box(low=low, high=high, shape=shape, dtype=dtype.type)
