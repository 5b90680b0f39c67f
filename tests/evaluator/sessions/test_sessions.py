"""Interactive sessions in the evaluator, without gRPC: autoreset, hidden seeds, budget, limits."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ale_robotics.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks import Registry, TaskSpec, default_registry

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-sess-1"
PRACTICE, EVAL = SessionKind.PRACTICE, SessionKind.EVAL


def _registry(**session: Any) -> Registry:
    data = json.loads(default_registry().entry(TASK).raw)
    data["session"].update(session)
    batch = default_registry().entry("td3-inverted-pendulum-v1").raw
    return Registry({"idp.json": json.dumps(data).encode(), "ip.json": batch})


MakeEv = Callable[..., Evaluator]


@pytest.fixture
def make_ev(tmp_path: Path) -> Iterator[MakeEv]:
    made: list[Evaluator] = []

    def make(state: str = "state", **session: Any) -> Evaluator:
        ev = Evaluator(EvaluatorConfig(tmp_path / state, None, workers=1), _registry(**session))
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.stop()


@pytest.fixture
def ev(make_ev: MakeEv) -> Evaluator:
    return make_ev()


def _task(ev: Evaluator) -> TaskSpec:
    return ev.task(TASK)


def _open(ev: Evaluator, kind: SessionKind = PRACTICE, n: int = 1, run: str = RUN) -> Session:
    return ev.sessions.open(_task(ev), kind, n, run if kind is EVAL else "")


def _zeros(s: Session) -> np.ndarray:
    return np.zeros(s.action_shape, dtype=s.action_dtype)


def _finish_episodes(s: Session) -> Any:
    """Step with zero actions until the eval budget is complete."""
    batch = None
    while not s.eval_complete:
        batch = s.step(_zeros(s))
    return batch


def _result(ev: Evaluator, run: str = RUN) -> EvalResult:
    return ev.result("", run)


def test_practice_session_is_a_sync_vector_env_step_for_step(ev: Evaluator) -> None:
    """NEXT_STEP autoreset, seeds s+i, reset without seed on autoreset: as SyncVectorEnv."""
    n = 4
    s = _open(ev, n=n)
    task = _task(ev)
    ref = gym.vector.SyncVectorEnv(
        [lambda: gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)] * n
    )
    assert np.array_equal(s.reset([3]).obs, ref.reset(seed=3)[0])
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(150):
        a = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
        got, want = s.step(a), ref.step(a)
        assert np.array_equal(got.obs, want[0])
        assert np.array_equal(got.rewards, want[1])
        assert np.array_equal(got.terminated, want[2])
        assert np.array_equal(got.truncated, want[3])
        ends += int(want[2].sum() + want[3].sum())
    assert ends > 5  # autoreset was exercised


def test_eval_episodes_run_on_the_runs_hidden_seeds(ev: Evaluator) -> None:
    s = _open(ev, EVAL)
    seeds = ev.hidden_seeds(_task(ev), RUN)
    env = gym.make(_task(ev).env.gym_id)
    first = s.reset([123])
    assert first.seeds_ignored
    assert np.array_equal(first.obs[0], env.reset(seed=seeds[0].value)[0])
    assert not np.array_equal(first.obs[0], env.reset(seed=123)[0])
    assert np.array_equal(s.reset([]).obs[0], env.reset(seed=seeds[1].value)[0])


def test_abandoned_episode_is_completed_with_the_null_action(ev: Evaluator) -> None:
    """A Reset cuts nothing short: the evaluator plays the rest with the null action
    (zero for this task) from where the agent left it (tests/evaluator/sessions/test_abandon.py)."""
    s = _open(ev, EVAL)
    s.reset([])
    for _ in range(3):
        s.step(_zeros(s))
    s.reset([])  # abandons episode 0 after 3 steps
    for _ in range(s.budget - 2):
        s.reset([])  # each abandons the one before, after 0 steps
    last = _finish_episodes(s)
    assert last.eval_complete and last.episodes_completed == s.budget
    res = _result(ev)
    assert res.state == "SUCCEEDED"
    env = gym.make(_task(ev).env.gym_id, max_episode_steps=_task(ev).env.max_episode_steps)
    for e, seed in zip(res.episodes, ev.hidden_seeds(_task(ev), RUN), strict=True):
        env.reset(seed=seed.value)
        ret, length, done = 0.0, 0, False
        while not done:
            _, r, term, trunc, _ = env.step(np.zeros(1, np.float32))
            ret, length, done = ret + float(r), length + 1, term or trunc
        assert (e.episode_return, e.length) == (ret, length)
    assert [e.index for e in res.episodes] == list(range(s.budget))
    assert res.episodes[0].abandoned and res.episodes[0].agent_steps == 3
    assert all(e.abandoned and e.agent_steps == 0 for e in res.episodes[1:-1])
    assert not res.episodes[-1].abandoned
    returns = [e.episode_return for e in res.episodes]
    assert res.metrics["mean_return"] == pytest.approx(np.mean(returns), abs=0, rel=1e-15)


def test_eval_result_is_a_job_row_with_signed_events(ev: Evaluator) -> None:
    s = _open(ev, EVAL, n=4)  # 10 episodes over 4 envs: spare envs go idle at the end
    s.reset([])
    assert _finish_episodes(s).episodes_completed == 10
    job = ev.job("", RUN)
    assert job.state.value == "SUCCEEDED" and job.episodes_done == job.episodes_total == 10
    res = _result(ev)
    assert sorted(e.index for e in res.episodes) == list(range(10))
    assert res.timings is not None
    assert res.timings.env_steps == sum(e.length for e in res.episodes) > 0
    kinds = [e["kind"] for e in res.events]
    assert kinds[:3] == ["evaluator_key", "seed_commitment", "session_opened"]
    assert kinds.count("episode_summary") == 10
    assert kinds[-2:] == ["progress_summary", "result"]
    assert res.events[-1]["payload"]["metrics"] == res.metrics
    assert [e["sig"]["eval_seq"] for e in res.events] == list(range(len(res.events)))
    with pytest.raises(OutOfRangeError, match="used up"):
        s.step(_zeros(s))


def test_one_eval_session_per_run(ev: Evaluator) -> None:
    s = _open(ev, EVAL)
    with pytest.raises(FailedPreconditionError, match="already has an open eval session"):
        _open(ev, EVAL)
    s.reset([])
    _finish_episodes_by_resets(s)
    ev.sessions.close(s.id)
    with pytest.raises(OutOfRangeError, match="has had its eval session"):
        _open(ev, EVAL)
    _open(ev, EVAL, run="run-sess-2")  # another run is fine


def _finish_episodes_by_resets(s: Session) -> None:
    for _ in range(s.budget - 1):
        s.reset([])
    _finish_episodes(s)


def test_reset_past_the_budget_is_out_of_range_without_side_effects(ev: Evaluator) -> None:
    s = _open(ev, EVAL)
    for _ in range(s.budget):
        s.reset([])
    done = s.episodes_completed
    with pytest.raises(OutOfRangeError, match="have started"):
        s.reset([])
    assert s.episodes_completed == done  # the running episode was not abandoned


def test_closing_early_completes_the_budget_with_the_null_action(ev: Evaluator) -> None:
    s = _open(ev, EVAL)
    s.reset([])
    s.step(_zeros(s))
    s.step(_zeros(s))
    assert ev.sessions.close(s.id) == s.budget
    res = _result(ev)
    assert res.state == "SUCCEEDED" and len(res.episodes) == s.budget
    assert res.episodes[0].abandoned and res.episodes[0].agent_steps == 2
    assert res.episodes[0].length > 2
    assert all(e.abandoned and e.agent_steps == 0 for e in res.episodes[1:])
    with pytest.raises(NotFoundError):
        ev.sessions.call(s.id, None, lambda x: x)


def test_step_before_reset_and_bad_actions(ev: Evaluator) -> None:
    s = _open(ev, n=2)
    with pytest.raises(FailedPreconditionError, match="Reset before Step"):
        s.step(_zeros(s))
    s.reset([0])
    bad: list[tuple[np.ndarray, str]] = [
        (np.zeros((2, 1), np.float64), "dtype is float64"),
        (np.zeros((2,), np.float32), r"needs \[num_envs, \*action_shape\] = \[2, 1\]"),
        (np.array([[0.0], [np.nan]], np.float32), "env 1 is NaN"),
        (np.array([[0.0], [1.5]], np.float32), "env 1 is out of bounds"),
    ]
    for action, message in bad:
        with pytest.raises(InvalidArgumentError, match=message):
            s.step(action)
    s.step(np.ones((2, 1), np.float32))  # the bounds themselves are fine


def test_practice_seed_rules(ev: Evaluator) -> None:
    s = _open(ev, n=3)
    with pytest.raises(InvalidArgumentError, match="2 seeds for 3 envs"):
        s.reset([1, 2])
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        s.reset([-1])
    a = s.reset([7, 8, 9]).obs.copy()
    b = s.reset([7]).obs.copy()
    assert np.array_equal(a, b)  # one seed s gives env i seed s+i


def test_session_limits_name_the_limit(make_ev: MakeEv) -> None:
    ev = make_ev(max_sessions=2, max_envs_per_session=4, practice_allowed=False)
    task = _task(ev)
    with pytest.raises(FailedPreconditionError, match="no practice sessions"):
        ev.sessions.open(task, PRACTICE, 1, "")
    with pytest.raises(ResourceExhaustedError, match=r"session\.max_envs_per_session = 4"):
        ev.sessions.open(task, EVAL, 5, RUN)
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        ev.sessions.open(task, EVAL, 0, RUN)
    ev.sessions.open(task, EVAL, 1, "r-a")
    ev.sessions.open(task, EVAL, 1, "r-b")
    # max_sessions is per run (tests/integration/test_shared_runs.py hits it); all runs
    # together are capped by max_sessions_total
    ev.sessions.open(task, EVAL, 1, "r-c")
    ev.config.max_sessions_total = 3
    with pytest.raises(ResourceExhaustedError, match=r"--max-sessions-total = 3"):
        ev.sessions.open(task, EVAL, 1, "r-d")
    with pytest.raises(FailedPreconditionError, match="not interactive"):
        ev.sessions.open(ev.task("td3-inverted-pendulum-v1"), PRACTICE, 1, "")


def test_eval_session_cannot_have_more_envs_than_episodes(ev: Evaluator) -> None:
    with pytest.raises(InvalidArgumentError, match="runs 10 episodes"):
        _open(ev, EVAL, n=11)


def test_idle_sessions_are_reaped_and_eval_ones_recorded(make_ev: MakeEv) -> None:
    ev = make_ev(idle_timeout_s=0.05)
    practice = _open(ev)
    ev_sess = _open(ev, EVAL)
    ev_sess.reset([])
    time.sleep(0.1)
    assert sorted(ev.sessions.reap()) == sorted([practice.id, ev_sess.id])
    with pytest.raises(NotFoundError, match="reaped"):
        ev.sessions.call(practice.id, None, lambda x: x)
    assert ev.sessions.wait_closed(30)  # closed on threads of their own
    res = _result(ev)
    assert res.state == "SUCCEEDED" and all(e.abandoned for e in res.episodes)


def test_a_busy_session_answers_deadline_exceeded(ev: Evaluator) -> None:
    s = _open(ev)
    with s.lock, pytest.raises(DeadlineExceededError, match="per-call deadline"):
        ev.sessions.call(s.id, 0.05, lambda x: x)
    assert ev.sessions.call(s.id, 0.05, lambda x: x.id) == s.id


def test_restart_fails_an_interrupted_eval_session(make_ev: MakeEv, tmp_path: Path) -> None:
    old = make_ev()
    s = _open(old, EVAL)
    s.reset([])
    beside = make_ev()  # same state dir, the first process alive: its session stands
    assert beside.job("", RUN).state.value == "RUNNING"
    # the first process "crashes": nothing renews its lease, which runs out
    con = sqlite3.connect(tmp_path / "state" / "jobs.sqlite3")
    with con:
        con.execute("UPDATE jobs SET lease_until = 0")
    con.close()
    new = make_ev()  # a restart once the session's lease has expired
    job = new.job("", RUN)
    assert job.state.value == "FAILED" and job.failure_source.value == "infrastructure"
    with pytest.raises(OutOfRangeError):
        _open(new, EVAL)
    old.sessions._sessions.clear()  # the "crashed" process never records anything more


def test_harness_close_run_closes_every_session_of_the_run(ev: Evaluator) -> None:
    _open(ev, EVAL)
    other = ev.sessions.open(_task(ev), PRACTICE, 1, "run-other")
    assert ev.sessions.close_run(RUN, "the agent exited") == 1
    assert len(ev.sessions) == 1
    res = _result(ev)
    assert res.state == "SUCCEEDED" and all(e.abandoned for e in res.episodes)
    ev.sessions.close(other.id)


def test_shutdown_mid_eval_session_is_not_the_agents_failure(ev: Evaluator) -> None:
    s = _open(ev, EVAL)
    s.reset([])
    ev.sessions.stop()
    res = _result(ev)
    assert res.state == "FAILED" and res.failure_source == "infrastructure"
    assert "the evaluator shut down" in res.failure_reason
