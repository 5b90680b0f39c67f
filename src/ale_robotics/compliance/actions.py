"""Action and limit compliance: every client mistake is a precise status, never INTERNAL,
and a session goes on working after a rejected call."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ale_robotics.compliance.endpoint import Endpoint, Wire, wire
from ale_robotics.errors import InvalidArgumentError, ResourceExhaustedError
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["ActionCompliance", "LimitsCompliance"]

NUM_ENVS = 2


def _ready(w: Wire) -> str:
    s = w.open(num_envs=NUM_ENVS)
    w.reset(s.session_id, [0])
    return s.session_id


def _valid(w: Wire) -> npt.NDArray[Any]:
    return w.sample_actions(np.random.default_rng(0), NUM_ENVS)


class ActionCompliance:
    """Needs a fixture ``ale_endpoint`` returning an :class:`Endpoint`."""

    def test_wrong_action_dtype_is_invalid_argument(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            sid = _ready(w)
            good = _valid(w)
            other = np.float32 if good.dtype != np.float32 else np.float64
            with pytest.raises(InvalidArgumentError):
                w.step(sid, good.astype(other))

    @pytest.mark.parametrize("change", ["one_env_short", "flattened", "extra_axis"])
    def test_wrong_action_shape_is_invalid_argument(
        self, ale_endpoint: Endpoint, change: str
    ) -> None:
        with wire(ale_endpoint) as w:
            sid = _ready(w)
            good = _valid(w)
            bad = {
                "one_env_short": good[:-1],
                "flattened": good.reshape(-1),
                "extra_axis": good[..., None],
            }[change]
            with pytest.raises(InvalidArgumentError):
                w.step(sid, bad)

    def test_out_of_bounds_action_is_invalid_argument(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            bounds = w.bounds()
            if bounds is None or not np.isfinite(bounds[1]).any():
                pytest.skip("the action spec has no finite upper bound")
            sid = _ready(w)
            bad = _valid(w)
            high = np.broadcast_to(bounds[1], bad.shape[1:])
            flat = int(np.flatnonzero(np.isfinite(high))[0])
            where = tuple(int(i) for i in np.unravel_index(flat, high.shape))
            top = float(high[where])
            bad[(NUM_ENVS - 1, *where)] = top + max(1.0, abs(top))
            with pytest.raises(InvalidArgumentError):
                w.step(sid, bad)

    def test_non_finite_action_is_invalid_argument(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            sid = _ready(w)
            bad = _valid(w)
            if bad.dtype.kind != "f":
                pytest.skip("integer actions cannot be NaN")
            bad.flat[0] = np.nan
            with pytest.raises(InvalidArgumentError):
                w.step(sid, bad)

    def test_malformed_action_tensor_is_invalid_argument(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            sid = _ready(w)
            t = to_tensor(_valid(w))
            with pytest.raises(InvalidArgumentError):
                w.step(sid, pb.Tensor(dtype=t.dtype, shape=t.shape, data=t.data[:-1]))
            with pytest.raises(InvalidArgumentError):
                w.step(sid, pb.Tensor(dtype=t.dtype, shape=[*t.shape[:-1], -1], data=t.data))
            with pytest.raises(InvalidArgumentError):
                w.step(sid, pb.Tensor())

    def test_session_survives_rejected_actions(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            sid = _ready(w)
            good = _valid(w)
            with pytest.raises(InvalidArgumentError):
                w.step(sid, good[:1])
            assert len(w.step(sid, good).info_json) == NUM_ENVS


class LimitsCompliance:
    """Needs a fixture ``ale_endpoint``; run it alone on the server (it fills every slot)."""

    def test_too_many_sessions_is_resource_exhausted(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            limit = w.spec().limits.max_sessions
            for _ in range(limit):
                w.open()
            with pytest.raises(ResourceExhaustedError, match="max_sessions"):
                w.open()

    def test_too_many_envs_is_resource_exhausted(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            limit = w.spec().limits.max_envs_per_session
            with pytest.raises(ResourceExhaustedError, match="max_envs_per_session"):
                w.open(num_envs=limit + 1)

    def test_bad_session_requests_are_invalid_argument(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            with pytest.raises(InvalidArgumentError):
                w.open(kind=pb.SESSION_KIND_UNSPECIFIED)
            with pytest.raises(InvalidArgumentError):
                w.open(num_envs=-1)
            s = w.open(num_envs=2)
            with pytest.raises(InvalidArgumentError):
                w.reset(s.session_id, [1, 2, 3])
