"""StepStream compliance, for servers that advertise the ``step_stream`` capability:
a stream answers exactly as unary Step calls do, and a bad request on it ends the
stream with Step's status while the session goes on working."""

from __future__ import annotations

import numpy as np
import pytest

from ale_robotics.client.stream import StepStream
from ale_robotics.compliance.endpoint import Endpoint, Wire, wire
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["StepStreamCompliance"]

NUM_ENVS = 2
STEPS = 12


def _needs_stream(w: Wire) -> None:
    if "step_stream" not in w.spec().capabilities:
        pytest.skip("the server does not advertise the step_stream capability")


class StepStreamCompliance:
    """Needs a fixture ``ale_endpoint`` returning an :class:`Endpoint`."""

    def test_stream_answers_like_unary_step(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            _needs_stream(w)
            rng = np.random.default_rng(11)
            actions = [w.sample_actions(rng, NUM_ENVS) for _ in range(STEPS)]
            unary, streamed = w.open(num_envs=NUM_ENVS), w.open(num_envs=NUM_ENVS)
            for s in (unary, streamed):
                w.reset(s.session_id, [21])
            stream = StepStream(w.client)
            try:
                for a in actions:
                    want = w.step(unary.session_id, a)
                    got = stream.step(
                        pb.StepRequest(session_id=streamed.session_id, action=to_tensor(a))
                    )
                    for field in ("observation", "reward", "terminated", "truncated"):
                        assert getattr(got, field) == getattr(want, field), (
                            f"StepStream's {field} differs from Step's"
                        )
            finally:
                stream.close()

    def test_bad_action_on_stream_is_invalid_argument(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            _needs_stream(w)
            s = w.open(num_envs=NUM_ENVS)
            w.reset(s.session_id, [0])
            bad = np.full(w.action_shape(NUM_ENVS), np.nan, dtype=w.action_dtype())
            stream = StepStream(w.client)
            try:
                with pytest.raises(InvalidArgumentError):
                    stream.step(pb.StepRequest(session_id=s.session_id, action=to_tensor(bad)))
                assert stream.dead, "an error ends the stream"
            finally:
                stream.close()
            good = w.sample_actions(np.random.default_rng(0), NUM_ENVS)
            w.step(s.session_id, good)  # the session is intact
