"""GetSpec compliance: the task's tensor specs and limits are well formed and advertised."""

from __future__ import annotations

import numpy as np

from ale_robotics.compliance.endpoint import Endpoint, wire
from ale_robotics.tensors import from_tensor, numpy_dtype
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["SpecCompliance"]


def _check_tensor_spec(spec: pb.TensorSpec) -> None:
    dtype = numpy_dtype(spec.dtype)  # INVALID_ARGUMENT-style error for an unknown enum
    shape = tuple(int(d) for d in spec.shape)
    assert all(d >= 0 for d in shape), f"{spec.name}: negative dimension in {list(shape)}"
    assert spec.HasField("low") == spec.HasField("high"), f"{spec.name}: only one bound set"
    if spec.HasField("low"):
        low, high = from_tensor(spec.low), from_tensor(spec.high)
        assert low.shape == shape and high.shape == shape, f"{spec.name}: bounds' shape"
        assert low.dtype == dtype and high.dtype == dtype, f"{spec.name}: bounds' dtype"
        if dtype.kind == "f":
            assert not np.isnan(low).any() and not np.isnan(high).any(), f"{spec.name}: NaN bound"
        assert (low.astype(np.float64) <= high.astype(np.float64)).all(), f"{spec.name}: low > high"


class SpecCompliance:
    """Needs a fixture ``ale_endpoint`` returning an :class:`Endpoint`."""

    def test_spec_declares_an_interactive_task(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            spec = w.spec()
        assert spec.protocol_version.startswith("ale_robotics.v")
        assert spec.mode == "interactive"
        assert "interactive" in spec.capabilities
        assert "eval_sessions" in spec.capabilities
        assert spec.task_config_json

    def test_spec_tensor_specs_are_well_formed(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            spec = w.spec()
        _check_tensor_spec(spec.observation_spec)
        _check_tensor_spec(spec.action_spec)

    def test_spec_advertises_session_limits(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            spec = w.spec()
        limits = spec.limits
        if "step_stream" in spec.capabilities:
            assert limits.max_step_streams > 0, "step_stream offered with no stream slot"
        assert limits.max_message_bytes > 0
        assert limits.max_sessions > 0
        assert limits.max_envs_per_session > 0
        assert limits.session_idle_timeout_s > 0
        assert limits.call_deadline_s > 0
        assert limits.eval_episodes > 0
        assert limits.max_episode_steps > 0
