"""Interactive mode over real gRPC on real Unix sockets: Gymnasium and SB3 through RemoteEnv."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-int-1"


@pytest.fixture(scope="module")
def ievaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEvaluator]:
    """A real evaluator for the interactive task, bound to one run (as the harness starts it)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ale-i-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=TASK, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)


@pytest.fixture
def itask(registry: Registry) -> TaskSpec:
    return registry.get(TASK)


def agent(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN)


def harness(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.harness_address, ev.harness_token, run_id=RUN)


def test_check_env_passes_on_remote_env(ievaluator: RunningEvaluator) -> None:
    env = RemoteEnv(agent(ievaluator), own_client=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unbounded obs space, no render spec: advice only
            check_env(env)
    finally:
        env.close()
    assert env.kind == "practice" and env.episode_budget == 0


def test_remote_vector_env_equals_sync_vector_env(
    ievaluator: RunningEvaluator, itask: TaskSpec
) -> None:
    n = 5
    remote = RemoteVectorEnv(agent(ievaluator), num_envs=n, own_client=True)
    local = gym.vector.SyncVectorEnv(
        [lambda: gym.make(itask.env.gym_id, max_episode_steps=itask.env.max_episode_steps)] * n
    )
    try:
        assert remote.metadata["autoreset_mode"] == local.metadata["autoreset_mode"]
        assert remote.single_observation_space == local.single_observation_space
        assert remote.single_action_space == local.single_action_space
        assert remote.action_space == local.action_space
        assert np.array_equal(remote.reset(seed=11)[0], local.reset(seed=11)[0])
        rng = np.random.default_rng(1)
        for _ in range(60):
            a = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
            got, want = remote.step(a), local.step(a)
            for x, y in zip(got[:4], want[:4], strict=True):
                assert np.array_equal(x, y)
            assert got[4].keys() == want[4].keys()
            for key in want[4]:
                assert got[4][key].dtype == want[4][key].dtype, key
                assert np.array_equal(got[4][key], want[4][key]), key
    finally:
        remote.close()
        local.close()


def test_sb3_ppo_trains_through_remote_env(ievaluator: RunningEvaluator) -> None:
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    env = RemoteEnv(agent(ievaluator), own_client=True)
    try:
        model = PPO("MlpPolicy", env, n_steps=512, batch_size=128, n_epochs=2, seed=0)
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(total_timesteps=2048)
        assert model.num_timesteps >= 2048
        after = list(model.policy.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    finally:
        env.close()


def test_get_spec_advertises_interactive_mode(
    ievaluator: RunningEvaluator, itask: TaskSpec
) -> None:
    with agent(ievaluator) as c:
        raw = c.get_spec().raw
    assert raw.mode == "interactive"
    assert set(raw.capabilities) >= {"interactive", "practice_sessions", "eval_sessions"}
    assert "autoreset:next_step" in raw.capabilities
    # what the client may rely on (it falls back on evaluators that lack them)
    assert {
        "autoreset:same_step",
        "autoreset:disabled",
        "watch_sessions",
        "float64_actions",
    } <= set(raw.capabilities)
    assert itask.session is not None
    assert raw.limits.max_sessions == itask.session.max_sessions
    assert raw.limits.max_envs_per_session == itask.session.max_envs_per_session
    assert raw.limits.eval_episodes == itask.eval.episodes
    assert raw.limits.max_episode_steps == itask.env.max_episode_steps


def test_client_mistakes_arrive_as_typed_errors(ievaluator: RunningEvaluator) -> None:
    env = RemoteVectorEnv(agent(ievaluator), num_envs=2, own_client=True)
    try:
        with pytest.raises(FailedPreconditionError):
            env.step(np.zeros((2, 1), np.float32))
        env.reset(seed=0)
        with pytest.raises(InvalidArgumentError, match="out of bounds"):
            env.step(np.full((2, 1), 3.0, np.float32))
        with pytest.raises(InvalidArgumentError, match="shape"):
            env.step(np.zeros((3, 1), np.float32))
        env.step(np.zeros((2, 1), np.float64))  # the client casts to the spec dtype
        sid = env.session_id
    finally:
        env.close()
    with agent(ievaluator) as c, pytest.raises(NotFoundError):
        c._call(c.stub.Reset, pb.ResetRequest(session_id=sid))


def test_closing_a_whole_run_is_for_the_harness_only(ievaluator: RunningEvaluator) -> None:
    env = RemoteEnv(agent(ievaluator), own_client=True)
    req = pb.CloseSessionRequest(run_id=RUN)
    with agent(ievaluator) as c, pytest.raises(PermissionDeniedError, match="harness-channel"):
        c._call(c.stub.CloseSession, req)
    with harness(ievaluator) as h:
        assert h._call(h.stub.CloseSession, req).sessions_closed >= 1
    with pytest.raises(NotFoundError):
        env.reset()
    env.close()  # closing what the harness already closed is fine


def test_message_size_limit_is_enforced_at_open(short_tmp: Path) -> None:
    ev = serve(
        EvaluatorConfig(short_tmp / "st", None, task_id=TASK, workers=1),
        agent_listen=f"unix://{short_tmp}/ma.sock",
        harness_listen=f"unix://{short_tmp}/mh.sock",
        max_message_bytes=32 * 1024,
    )
    try:
        with AleClient(ev.agent_address, ev.agent_token, task_id=TASK) as c:
            assert c.get_spec().max_message_bytes == 32 * 1024
            with pytest.raises(ResourceExhaustedError, match="max_message_bytes"):
                RemoteVectorEnv(c, num_envs=64)
            RemoteVectorEnv(c, num_envs=2).close()
    finally:
        ev.stop(grace=0.5)


def test_eval_session_is_read_like_a_batch_job(ievaluator: RunningEvaluator) -> None:
    """Last in this module: it uses the run's one eval session."""
    env = RemoteVectorEnv(agent(ievaluator), num_envs=3, kind="eval", own_client=True)
    seen: list[str] = []
    try:
        assert env.seeds_ignored and env.episode_budget == 10
        obs, info = env.reset(seed=5)
        seen.append(repr((obs.tolist(), info)))
        while not env.eval_complete:
            out = env.step(np.zeros((3, 1), np.float32))
            seen.append(repr(out))
        assert env.episodes_completed == 10
        with pytest.raises(OutOfRangeError):
            env.step(np.zeros((3, 1), np.float32))
    finally:
        env.close()
    with agent(ievaluator) as c:
        st = c.status()
        assert st.state == "SUCCEEDED" and st.episodes_done == st.episodes_total == 10
        with pytest.raises(PermissionDeniedError):
            c._call(c.stub.GetEvalResult, pb.GetEvalResultRequest(run_id=RUN))
        with pytest.raises(OutOfRangeError, match="has had its eval session"):
            RemoteEnv(c, kind="eval")
    with harness(ievaluator) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(run_id=RUN))
    res = EvalResult.model_validate_json(r.eval_result_json)
    assert r.official and res.state == "SUCCEEDED" and len(res.episodes) == 10
    assert set(res.metrics) == {"mean_return", "std_return", "mean_episode_length"}
    blob = "".join(seen) + r.eval_result_json
    for seed in ievaluator.evaluator.hidden_seeds(ievaluator.evaluator.task(TASK), RUN):
        assert str(seed.value) not in blob  # raw hidden seeds never reach the agent
