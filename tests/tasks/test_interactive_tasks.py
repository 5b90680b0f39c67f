"""Invariants over every interactive task: the spec survives GetSpec, the session settings
validate and are advertised, and the same hidden seeds give the same metric."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from ale_robotics.client import AleClient
from ale_robotics.evaluator import Evaluator, EvaluatorConfig, RunningEvaluator
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks import SessionSettings, TaskMode, default_registry
from ale_robotics.tensors import from_tensor

REG = default_registry()
INTERACTIVE = [e.spec.id for e in REG if e.spec.mode is TaskMode.INTERACTIVE]


@pytest.mark.parametrize("task_id", INTERACTIVE)
def test_spec_round_trips_through_getspec(server: RunningEvaluator, task_id: str) -> None:
    task = REG.get(task_id)
    with AleClient(server.agent_address, server.agent_token, task_id=task_id) as client:
        view = client.get_spec()
    assert view.task == task and view.contract is None
    env = gym.make(task.env.gym_id, disable_env_checker=True, **task.env.kwargs)
    try:
        for spec, space in ((view.raw.observation_spec, env.observation_space),
                            (view.raw.action_spec, env.action_space)):  # fmt: skip
            assert tuple(spec.shape) == space.shape
            low, high = from_tensor(spec.low), from_tensor(spec.high)
            assert low.dtype == space.dtype
            assert np.array_equal(low, space.low) and np.array_equal(high, space.high)
    finally:
        env.close()


@pytest.mark.parametrize("task_id", INTERACTIVE)
def test_session_settings_validate_and_are_advertised(
    server: RunningEvaluator, task_id: str
) -> None:
    task = REG.get(task_id)
    assert task.session is not None
    assert SessionSettings.model_validate(task.session.model_dump()) == task.session
    with AleClient(server.agent_address, server.agent_token, task_id=task_id) as client:
        limits = client.get_spec().raw.limits
    assert limits.max_sessions == task.session.max_sessions
    assert limits.max_envs_per_session == task.session.max_envs_per_session
    assert limits.session_idle_timeout_s == task.session.idle_timeout_s
    assert limits.call_deadline_s == task.session.call_deadline_s
    assert limits.eval_episodes == task.eval.episodes
    assert limits.max_episode_steps == task.env.max_episode_steps


def _eval(state: Path, task_id: str, run_id: str, episodes: int = 2) -> EvalResult:
    """An eval session played in-process with a fixed observation-dependent policy."""
    ev = Evaluator(EvaluatorConfig(state, None, workers=1, smoke_episodes=episodes), REG)
    try:
        task = ev.task(task_id)
        s = ev.sessions.open(task, SessionKind.EVAL, episodes, run_id)
        obs = s.reset([]).obs
        weights = np.random.default_rng(0).standard_normal((obs.shape[1], s.action_shape[1]))
        while not s.eval_complete:
            action = np.tanh(0.1 * obs.astype(np.float64) @ weights)
            obs = s.step(action.astype(s.action_dtype)).obs
        return ev.result("", run_id)
    finally:
        ev.stop()


@pytest.mark.parametrize("task_id", INTERACTIVE)
def test_same_hidden_seeds_give_the_same_metric(tmp_path: Path, task_id: str) -> None:
    first = _eval(tmp_path / "a", task_id, "run-same")
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / "secret", tmp_path / "b" / "secret")
    again = _eval(tmp_path / "b", task_id, "run-same")
    other = _eval(tmp_path / "b", task_id, "run-other")
    assert first.state == again.state == "SUCCEEDED"
    assert first.metrics == again.metrics
    assert first.metrics[REG.get(task_id).primary_metric.name] >= 0
    assert [e.episode_return for e in first.episodes] == [e.episode_return for e in again.episodes]
    assert [e.episode_return for e in other.episodes] != [e.episode_return for e in first.episodes]
