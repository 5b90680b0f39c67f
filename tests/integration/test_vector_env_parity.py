"""``RemoteVectorEnv`` against ``SyncVectorEnv`` over local envs, on the same seeds.

Each Gymnasium vector feature third-party code uses: ``reset_mask``, ``None`` entries
in a seed list, ``np_random_seed`` per env, ``call``/``get_attr``/``set_attr``, and
the three autoreset modes; observations, rewards, flags and infos (keys, dtypes,
values, ``final_obs``/``final_info``) must be equal step for step. Real gRPC on real
Unix sockets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from helpers import run_bound_evaluator

from ale_robotics.client import AleClient, RemoteVectorEnv
from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.tasks import Registry

TASK = "td3-inverted-double-pendulum-v1"
GYM_ID = "InvertedDoublePendulum-v5"
RUN = "run-vec-1"
N = 3


@pytest.fixture(scope="module")
def vevaluator(registry: Registry) -> Iterator[RunningEvaluator]:
    with run_bound_evaluator(registry, TASK, RUN) as running:
        yield running


def _pair(
    ev: RunningEvaluator, mode: AutoresetMode = AutoresetMode.NEXT_STEP
) -> tuple[RemoteVectorEnv, SyncVectorEnv]:
    client = AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN)
    kw = {} if mode is AutoresetMode.NEXT_STEP else {"autoreset_mode": mode}
    remote = RemoteVectorEnv(client, num_envs=N, own_client=True, **kw)
    local = SyncVectorEnv(
        [lambda: gym.make(GYM_ID, max_episode_steps=1000)] * N, autoreset_mode=mode
    )
    return remote, local


def _same(got: Any, want: Any, where: str = "") -> None:
    """Equal values, types and dtypes, recursively (infos nest dicts and arrays)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), where
        assert got.dtype == want.dtype and got.shape == want.shape, where
        if want.dtype == object:
            for g, w in zip(got, want, strict=True):
                _same(g, w, f"{where}[]")
        else:
            assert np.array_equal(got, want), where
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, where


def _actions(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1, 1, (N, 1)).astype(np.float32)


def test_autoreset_same_step_step_for_step(vevaluator: RunningEvaluator) -> None:
    """SAME_STEP (``final_obs``/``final_info`` included) over enough steps for several
    episodes to end; only NEXT_STEP (tested in test_interactive_grpc) used to be offered."""
    mode = AutoresetMode.SAME_STEP
    remote, local = _pair(vevaluator, mode)
    try:
        assert remote.metadata["autoreset_mode"] == local.metadata["autoreset_mode"] == mode
        _same(remote.reset(seed=11), local.reset(seed=11))
        rng = np.random.default_rng(1)
        ended = 0
        for step in range(80):
            a = _actions(rng)
            got, want = remote.step(a), local.step(a)
            _same(got, want, f"step {step}")
            ended += int(np.sum(want[2] | want[3]))
        assert ended >= 2 * N, "the run should end several episodes"
    finally:
        remote.close()
        local.close()


def test_autoreset_disabled_with_reset_mask(vevaluator: RunningEvaluator) -> None:
    """DISABLED: ended envs are restarted with ``reset(options={"reset_mask": done})``, the
    loop Gymnasium documents; stepping an ended env first is refused, not stepped."""
    remote, local = _pair(vevaluator, AutoresetMode.DISABLED)
    try:
        _same(remote.reset(seed=5), local.reset(seed=5))
        rng = np.random.default_rng(2)
        masked = 0
        for step in range(80):
            a = _actions(rng)
            got, want = remote.step(a), local.step(a)
            _same(got, want, f"step {step}")
            done = want[2] | want[3]
            if done.any():
                if masked == 0:
                    with pytest.raises(FailedPreconditionError, match="autoreset is disabled"):
                        remote.step(a)
                masked += 1
                _same(
                    remote.reset(options={"reset_mask": done}),
                    local.reset(options={"reset_mask": done}),
                    f"masked reset {step}",
                )
        assert masked >= 2
    finally:
        remote.close()
        local.close()


def test_reset_mask_resets_only_the_masked_envs(vevaluator: RunningEvaluator) -> None:
    """NEXT_STEP mode too: the unmasked envs keep their episode (they used to be reset)."""
    remote, local = _pair(vevaluator)
    try:
        _same(remote.reset(seed=3), local.reset(seed=3))
        rng = np.random.default_rng(3)
        for _ in range(3):
            a = _actions(rng)
            _same(remote.step(a), local.step(a))
        mask = np.array([False, True, False])
        _same(
            remote.reset(seed=[None, 40, None], options={"reset_mask": mask}),
            local.reset(seed=[None, 40, None], options={"reset_mask": mask}),
        )
        for _ in range(5):
            a = _actions(rng)
            _same(remote.step(a), local.step(a))
        for bad, error in (
            (np.array([1, 0, 0]), TypeError),
            (np.zeros(N, dtype=bool), ValueError),
            ([True, False, False], TypeError),
        ):
            with pytest.raises(error):
                remote.reset(options={"reset_mask": bad})
    finally:
        remote.close()
        local.close()


def test_none_seeds_and_per_env_np_random_seed(vevaluator: RunningEvaluator) -> None:
    """``seed=[7, None, None]`` used to be refused; the unseeded envs go on with their own
    generators, and ``np_random_seed`` is one seed per env (it used to be one int)."""
    remote, local = _pair(vevaluator)
    try:
        _same(remote.reset(seed=[1, 2, 3]), local.reset(seed=[1, 2, 3]))
        _same(remote.reset(seed=[7, None, None]), local.reset(seed=[7, None, None]))
        _same(remote.reset(), local.reset())
        assert remote.np_random_seed == local.np_random_seed == (7, 2, 3)
        _same(remote.get_attr("np_random_seed"), local.get_attr("np_random_seed"))
        with pytest.raises(ValueError, match="length must match"):
            remote.reset(seed=[1, 2])
    finally:
        remote.close()
        local.close()


def test_call_get_attr_and_set_attr(vevaluator: RunningEvaluator) -> None:
    """The three used to be missing. They reach client-side views of the envs; what only
    the evaluator's env objects hold is an AttributeError that says so."""
    remote, local = _pair(vevaluator)
    try:
        remote.reset(seed=0)
        local.reset(seed=0)
        for name in ("render_mode", "observation_space", "action_space"):
            _same(remote.get_attr(name), local.get_attr(name), name)
        assert remote.call("render") == (None,) * N  # no render_mode (local MuJoCo raises)
        assert [s.max_episode_steps for s in remote.get_attr("spec")] == [1000] * N
        remote.set_attr("lr", [0.1, 0.2, 0.3])
        local.set_attr("lr", [0.1, 0.2, 0.3])
        _same(remote.get_attr("lr"), local.get_attr("lr"))
        remote.set_attr("tag", "same")
        local.set_attr("tag", "same")
        _same(remote.call("tag"), local.call("tag"))
        with pytest.raises(ValueError, match="length equal to the number"):
            remote.set_attr("lr", [1, 2])
        with pytest.raises(AttributeError, match="not reachable"):
            remote.get_attr("data")  # MuJoCo's MjData lives on the evaluator
    finally:
        remote.close()
        local.close()
