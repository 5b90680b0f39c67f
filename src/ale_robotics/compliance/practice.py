"""Practice-session compliance: outputs agree with the spec, seeds make runs repeatable,
autoreset is Gymnasium's NEXT_STEP, and the session-state errors are the precise ones."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ale_robotics.compliance.endpoint import Endpoint, Wire, wire
from ale_robotics.errors import FailedPreconditionError, NotFoundError
from ale_robotics.tensors import from_tensor, numpy_dtype
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["PracticeSessionCompliance"]

NUM_ENVS = 3


def _check_obs(w: Wire, t: pb.Tensor, num_envs: int) -> npt.NDArray[Any]:
    spec = w.spec().observation_spec
    obs = from_tensor(t, "observation")
    assert obs.dtype == numpy_dtype(spec.dtype), "observation dtype differs from the spec"
    assert obs.shape == (num_envs, *spec.shape), "observation shape is not [num_envs, *shape]"
    if spec.HasField("low"):
        low = from_tensor(spec.low).astype(np.float64)
        high = from_tensor(spec.high).astype(np.float64)
        values = obs.astype(np.float64)
        assert ((values >= low) & (values <= high)).all(), "observation outside the spec's bounds"
    return obs


def _check_infos(r: Any, num_envs: int) -> None:
    """info_json: one JSON object (or "") per env; info_columns: [num_envs, ...] + bool mask."""
    assert len(r.info_json) == num_envs, "one info_json entry per env"
    json_keys: set[str] = set()
    for s in r.info_json:
        info = json.loads(s) if s else {}
        assert isinstance(info, dict), "each info_json entry is a JSON object"
        json_keys.update(info)
    seen: set[str] = set()
    for c in r.info_columns:
        assert c.key not in seen, f"info column {c.key!r} sent twice"
        assert c.key not in json_keys, f"info key {c.key!r} is both a column and in info_json"
        seen.add(c.key)
        values, mask = from_tensor(c.values), from_tensor(c.mask).astype(np.bool_)
        assert values.ndim >= 1 and values.shape[0] == num_envs, "info column is [num_envs, ...]"
        assert c.mask.dtype == pb.DTYPE_BOOL and mask.shape == (num_envs,), "mask: bool [num_envs]"
        assert mask.any(), f"info column {c.key!r} has no env"
        assert (values[~mask] == 0).all(), f"info column {c.key!r} is not zero where masked out"


class PracticeSessionCompliance:
    """Needs a fixture ``ale_endpoint`` returning an :class:`Endpoint`."""

    def test_reset_observation_agrees_with_spec(self, ale_endpoint: Endpoint) -> None:
        with wire(ale_endpoint) as w:
            s = w.open(num_envs=NUM_ENVS)
            assert s.num_envs == NUM_ENVS
            assert s.episode_budget == 0 and not s.seeds_ignored
            r = w.reset(s.session_id, [1])
            _check_obs(w, r.observation, NUM_ENVS)
            _check_infos(r, NUM_ENVS)
            assert not r.seeds_ignored

    def test_step_outputs_agree_with_spec(self, ale_endpoint: Endpoint) -> None:
        rng = np.random.default_rng(0)
        with wire(ale_endpoint) as w:
            s = w.open(num_envs=NUM_ENVS)
            w.reset(s.session_id, [2])
            for _ in range(5):
                r = w.step(s.session_id, w.sample_actions(rng, NUM_ENVS))
                _check_obs(w, r.observation, NUM_ENVS)
                reward = from_tensor(r.reward)
                assert reward.dtype.kind == "f" and reward.shape == (NUM_ENVS,)
                assert np.isfinite(reward).all()
                for flags in (r.terminated, r.truncated):
                    arr = from_tensor(flags)
                    assert arr.dtype == np.bool_ and arr.shape == (NUM_ENVS,)
                _check_infos(r, NUM_ENVS)

    def test_practice_is_deterministic_under_a_seed(self, ale_endpoint: Endpoint) -> None:
        runs = []
        for _ in range(2):
            rng = np.random.default_rng(7)
            with wire(ale_endpoint) as w:
                s = w.open(num_envs=2)
                seen = [w.reset(s.session_id, [1234]).observation.data]
                for _ in range(20):
                    r = w.step(s.session_id, w.sample_actions(rng, 2))
                    seen += [r.observation.data, r.reward.data, r.terminated.data]
                runs.append(seen)
        assert runs[0] == runs[1], "same seed and actions gave different results"

    def test_autoreset_is_next_step(self, ale_endpoint: Endpoint) -> None:
        rng = np.random.default_rng(3)
        with wire(ale_endpoint) as w:
            steps = w.spec().limits.max_episode_steps
            s = w.open(num_envs=2)
            w.reset(s.session_id, [5])
            for _ in range(steps + 1):
                r = w.step(s.session_id, w.sample_actions(rng, 2))
                done = from_tensor(r.terminated).astype(bool) | from_tensor(r.truncated).astype(
                    bool
                )
                if done.any():
                    break
            else:
                pytest.fail(f"no episode ended within max_episode_steps = {steps}")
            after = w.step(s.session_id, w.sample_actions(rng, 2))
            ended = np.flatnonzero(done)
            assert (from_tensor(after.reward)[ended] == 0).all(), "autoreset step has reward 0"
            assert not from_tensor(after.terminated)[ended].any()
            assert not from_tensor(after.truncated)[ended].any()

    def test_step_before_reset_is_failed_precondition(self, ale_endpoint: Endpoint) -> None:
        rng = np.random.default_rng(0)
        with wire(ale_endpoint) as w:
            s = w.open()
            with pytest.raises(FailedPreconditionError):
                w.step(s.session_id, w.sample_actions(rng, 1))

    def test_unknown_session_is_not_found(self, ale_endpoint: Endpoint) -> None:
        rng = np.random.default_rng(0)
        with wire(ale_endpoint) as w:
            with pytest.raises(NotFoundError):
                w.reset("no-such-session")
            with pytest.raises(NotFoundError):
                w.step("no-such-session", w.sample_actions(rng, 1))
            with pytest.raises(NotFoundError):
                w.close("no-such-session")
            s = w.open()
            w.close(s.session_id)
            with pytest.raises(NotFoundError):
                w.reset(s.session_id)
