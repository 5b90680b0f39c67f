"""Eval-session compliance: hidden seeds (client seeds ignored, and said so), a fixed
episode budget past which calls are OUT_OF_RANGE, and one eval session per run."""

from __future__ import annotations

import numpy as np
import pytest

from ale_robotics.compliance.endpoint import Endpoint, wire
from ale_robotics.errors import FailedPreconditionError, OutOfRangeError
from ale_robotics.tensors import from_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["EvalSessionCompliance"]

EVAL = pb.SESSION_KIND_EVAL


def _run_id(endpoint: Endpoint) -> str:
    if endpoint.new_run_id is None:
        pytest.skip("the endpoint has no fresh run ids for eval sessions")
    return endpoint.new_run_id()


class EvalSessionCompliance:
    """Needs a fixture ``ale_endpoint`` returning an :class:`Endpoint`."""

    def test_eval_session_ignores_client_seeds(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            practice = w.open()
            p1 = w.reset(practice.session_id, [42]).observation.data
            p2 = w.reset(practice.session_id, [42]).observation.data
            assert p1 == p2, "a practice session must honour seeds"
            s = w.open(kind=EVAL, run_id=_run_id(ale_endpoint))
            assert s.seeds_ignored and s.episode_budget > 0
            first = w.reset(s.session_id, [42])
            assert first.seeds_ignored
            if s.episode_budget > 1:
                second = w.reset(s.session_id, [42])
                assert second.seeds_ignored
                assert second.observation.data != first.observation.data, (
                    "the same client seed gave the same start twice: seeds were not ignored"
                )
            assert first.observation.data != p1, "eval episode started from the client's seed"

    def test_eval_budget_is_enforced(self, ale_endpoint: Endpoint) -> None:
        rng = np.random.default_rng(0)
        run_id = _run_id(ale_endpoint)
        with wire(ale_endpoint) as w:
            steps = w.spec().limits.max_episode_steps
            s = w.open(kind=EVAL, run_id=run_id)
            with pytest.raises(FailedPreconditionError):
                w.open(kind=EVAL, run_id=run_id)  # one eval session per run at a time
            for _ in range(s.episode_budget):  # each Reset abandons the running episode
                w.reset(s.session_id)
            with pytest.raises(OutOfRangeError):
                w.reset(s.session_id)
            for _ in range(steps + 1):
                r = w.step(s.session_id, w.sample_actions(rng, 1))
                if r.eval_complete:
                    break
            assert r.eval_complete and r.episodes_completed == s.episode_budget
            assert from_tensor(r.terminated)[0] or from_tensor(r.truncated)[0]
            with pytest.raises(OutOfRangeError):
                w.step(s.session_id, w.sample_actions(rng, 1))
            with pytest.raises(OutOfRangeError):
                w.reset(s.session_id)
            assert w.close(s.session_id).episodes_completed == s.episode_budget
            with pytest.raises(OutOfRangeError):
                w.open(kind=EVAL, run_id=run_id)  # the run has had its eval session
