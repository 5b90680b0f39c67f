"""Remote envs follow Gymnasium's conventions where third-party code relies on them.

``spec`` and ``max_episode_steps`` (TimeLimit-aware code), ``gym.make`` of a registered
entry point with ``render_mode``, frames rendered by the evaluator (``RecordVideo``),
typed errors after ``close()`` and ``reset()`` reopening a closed env (SB3's
``check_env`` closes an env and then resets it), and refusals to pickle or copy.
Real gRPC on real Unix sockets throughout.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from helpers import run_bound_evaluator

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
from ale_robotics.errors import AleError, FailedPreconditionError, InvalidArgumentError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import Registry

TASK = "td3-inverted-double-pendulum-v1"
GYM_ID = "InvertedDoublePendulum-v5"
NO_RENDER_TASK = "tdmpc2-cheetah-run-v1"  # a dm_control task: its env declares no render modes
RUN = "run-gym-1"


@pytest.fixture(scope="module")
def gevaluator(registry: Registry) -> Iterator[RunningEvaluator]:
    with run_bound_evaluator(registry, TASK, RUN) as running:
        yield running


def _agent(ev: RunningEvaluator, task: str = TASK) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=task, run_id=RUN)


def _vars(ev: RunningEvaluator) -> dict[str, str]:
    return {"ALE_ENDPOINT": ev.agent_address, "ALE_TOKEN": ev.agent_token, "ALE_RUN_ID": RUN}


def _local_rendering_works() -> bool:
    """Off-screen MuJoCo rendering on this host (EGL), tried in a child process."""
    code = (
        "import gymnasium as gym; e = gym.make('InvertedDoublePendulum-v5', "
        "render_mode='rgb_array'); e.reset(seed=0); assert e.render().shape[2] == 3; e.close()"
    )
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    return done.returncode == 0


needs_rendering = pytest.mark.skipif(
    not _local_rendering_works(), reason="no off-screen OpenGL (EGL) on this host"
)


def test_spec_and_max_episode_steps_carry_the_servers_step_limit(
    gevaluator: RunningEvaluator,
) -> None:
    """``spec`` used to be None and the step limit private, so TimeLimit-aware code (the
    TD3 authors' ``done_bool``) could not see where the server truncates."""
    env = RemoteEnv(_agent(gevaluator), own_client=True)
    try:
        assert env.max_episode_steps == 1000
        assert env.spec.max_episode_steps == 1000
        assert env.spec.id == f"ale-robotics/{TASK}"
        assert env.spec.entry_point == "ale_robotics.client:RemoteEnv"
        again = env.spec.make()  # Gymnasium's check_env rebuilds an env from its spec
        try:
            assert again.unwrapped.session_id != env.session_id
            assert again.spec is not None and again.spec.max_episode_steps == 1000
        finally:
            again.close()
    finally:
        env.close()


def test_gym_make_of_a_registered_task_with_a_render_mode(gevaluator: RunningEvaluator) -> None:
    """The five lines of the README: a task registered as a Gymnasium id, for ``gym.make``
    (one env) and ``gym.make_vec`` (one batched session). ``gym.make(id,
    render_mode="rgb_array")`` used to raise TypeError (no such parameter)."""
    gym_id = "ale-test/InvertedDoublePendulum-v1"
    gym.register(
        gym_id,
        entry_point="ale_robotics.client:RemoteEnv",
        vector_entry_point="ale_robotics.client:RemoteVectorEnv",
        kwargs={"task_id": TASK, "env": _vars(gevaluator)},
    )
    try:
        env = gym.make(gym_id)
        try:
            assert env.spec is not None and env.spec.id == gym_id
            assert env.spec.max_episode_steps == 1000  # filled in: no client TimeLimit needed
            obs, _ = env.reset(seed=1)
            assert obs.shape == (9,)
        finally:
            env.close()
        venv = gym.make_vec(gym_id, num_envs=3)
        try:
            assert isinstance(venv, RemoteVectorEnv) and venv.num_envs == 3
            assert gevaluator.evaluator.sessions.count(RUN) == 1
            obs, _ = venv.reset(seed=1)
            assert obs.shape == (3, 9)
        finally:
            venv.close()
        if _local_rendering_works():
            with gym.make(gym_id, render_mode="rgb_array") as renv:
                renv.reset(seed=1)
                frame = renv.render()
                assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
                assert frame.ndim == 3 and frame.shape[2] == 3
                assert renv.metadata["render_fps"] == 20
    finally:
        del gym.registry[gym_id]


@needs_rendering
def test_rgb_array_frames_are_the_local_envs_frames(gevaluator: RunningEvaluator) -> None:
    """Frames are rendered by the evaluator from the session's own envs: the same pixels
    as a local env on the same seed and actions, and RenderCollection (what RecordVideo
    builds on) records them per step."""
    actions = np.random.default_rng(0).uniform(-1, 1, (5, 1)).astype(np.float32)
    remote = gym.wrappers.RenderCollection(
        RemoteEnv(_agent(gevaluator), own_client=True, render_mode="rgb_array")
    )
    local = gym.wrappers.RenderCollection(gym.make(GYM_ID, render_mode="rgb_array"))
    try:
        for env in (remote, local):
            env.reset(seed=4)
            for action in actions:
                env.step(action)
        remote_frames, local_frames = remote.render(), local.render()
        assert len(remote_frames) == len(local_frames) == 6
        for got, want in zip(remote_frames, local_frames, strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype == np.uint8
            assert np.array_equal(got, want)
        assert remote.unwrapped.metadata["render_modes"] == ["rgb_array"]
    finally:
        remote.close()
        local.close()


@needs_rendering
def test_a_vector_env_renders_one_frame_per_env(gevaluator: RunningEvaluator) -> None:
    """As ``SyncVectorEnv.render``: a tuple with each env's frame."""
    env = RemoteVectorEnv(_agent(gevaluator), num_envs=2, own_client=True, render_mode="rgb_array")
    try:
        env.reset(seed=[1, 2])
        frames = env.render()
        assert frames is not None and len(frames) == 2
        assert frames[0].shape == frames[1].shape and frames[0].shape[2] == 3
        assert not np.array_equal(frames[0], frames[1])  # two seeds, two poses
    finally:
        env.close()


def test_a_task_that_cannot_render_declares_no_modes_and_refuses_rgb_array(
    gevaluator: RunningEvaluator, short_tmp: Path, registry: Registry
) -> None:
    """No render modes declared, a clear refusal for rgb_array, and render() without a
    mode warns and returns None as a local env does."""
    ev = serve(
        EvaluatorConfig(short_tmp / "st", None, task_id=NO_RENDER_TASK, run_id=RUN, workers=1),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        env = RemoteEnv(_agent(ev, NO_RENDER_TASK), own_client=True)
        try:
            assert env.metadata["render_modes"] == []
            with pytest.warns(UserWarning, match="render_mode"):
                assert env.render() is None
        finally:
            env.close()
        with pytest.raises(FailedPreconditionError, match=r"offers render modes \[\]"):
            RemoteEnv(_agent(ev, NO_RENDER_TASK), own_client=True, render_mode="rgb_array")
        assert ev.evaluator.sessions.count(RUN) == 0
    finally:
        ev.stop(grace=0.5)
    with pytest.raises(InvalidArgumentError, match="'rgb_array'"):
        RemoteEnv(_agent(gevaluator), own_client=True, render_mode="human")


def test_from_env_takes_task_transport_and_render_mode(gevaluator: RunningEvaluator) -> None:
    """``from_env`` used to take only ``kind`` and ``env``."""
    env = RemoteEnv.from_env(task_id=TASK, transport="unary", env=_vars(gevaluator))
    venv = RemoteVectorEnv.from_env(num_envs=2, task_id=TASK, env=_vars(gevaluator))
    try:
        assert env.task_id == TASK and env.transport == "unary" and env.render_mode is None
        env.reset(seed=0)
        env.step(env.action_space.sample())
        assert env.transport == "unary"
        assert venv.task_id == TASK and venv.num_envs == 2
    finally:
        env.close()
        venv.close()


def test_after_close_calls_raise_typed_errors_and_reset_reopens(
    gevaluator: RunningEvaluator,
) -> None:
    """``step`` after ``close`` used to raise a raw ``ValueError: Cannot invoke RPC on
    closed channel!``; ``reset`` after ``close`` now opens a new session, as a local env
    starts over (and as SB3's ``check_env`` expects)."""
    for make in (
        lambda: RemoteEnv(_agent(gevaluator), own_client=True),
        lambda: RemoteVectorEnv(_agent(gevaluator), num_envs=2, own_client=True),
    ):
        env = make()
        env.reset(seed=0)
        first = env.session_id
        env.close()
        env.close()  # twice is fine, as for local envs
        with pytest.raises(FailedPreconditionError, match="closed"):
            env.step(env.action_space.sample())
        obs, _ = env.reset(seed=0)
        assert env.session_id != first and obs is not None
        env.step(env.action_space.sample())
        env.close()
    client = _agent(gevaluator)
    env = RemoteEnv(client)
    env.reset(seed=0)
    client.close()  # the caller's own client, closed under the env
    with pytest.raises(AleError, match="connection is closed"):
        env.step(env.action_space.sample())
    assert gevaluator.evaluator.sessions.count(RUN) <= 1  # that one is freed when dropped


def test_sb3_check_env_with_the_render_check(gevaluator: RunningEvaluator) -> None:
    """SB3's ``check_env(skip_render_check=False)`` closes the env and resets it again."""
    from stable_baselines3.common.env_checker import check_env

    env = RemoteEnv(_agent(gevaluator), own_client=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unbounded observation space: advice only
            check_env(env, skip_render_check=False)
        env.reset(seed=0)
        env.step(env.action_space.sample())
    finally:
        env.close()


def test_envs_refuse_pickling_and_copying_with_what_to_do(gevaluator: RunningEvaluator) -> None:
    """A copy would share (or fail to own) the session: refused, naming the alternative."""
    env = RemoteEnv(_agent(gevaluator), own_client=True)
    venv = RemoteVectorEnv(_agent(gevaluator), num_envs=2, own_client=True)
    try:
        for e in (env, venv):
            for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
                with pytest.raises(TypeError, match="Pickle a function that makes the env"):
                    attempt(e)
    finally:
        env.close()
        venv.close()
