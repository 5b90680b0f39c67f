"""Abandoned eval episodes are completed with the null action, whichever way the agent left.

Every way an eval session can be left unfinished (a Reset mid-episode, CloseSession,
the harness closing the run after the agent exited, an idle-timeout reap, never
starting) must give exactly the result of an agent that plays the null action to the
end; completing takes a while, so it must not hold up other sessions, and a shutdown in
the middle must still record the run, as the evaluator's failure.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import new_secret
from ale_robotics.tasks import Registry, default_registry

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-abandon-paths"
EVAL, PRACTICE = SessionKind.EVAL, SessionKind.PRACTICE
SECRET = new_secret()


def _registry(**session: Any) -> Registry:
    data = json.loads(default_registry().entry(TASK).raw)
    data["session"].update(session)
    return Registry({"idp.json": json.dumps(data).encode()})


MakeEv = Callable[..., Evaluator]


@pytest.fixture
def make_ev(tmp_path: Path) -> Iterator[MakeEv]:
    made: list[Evaluator] = []

    def make(name: str, **session: Any) -> Evaluator:
        state = tmp_path / name
        state.mkdir()
        (state / "secret").write_bytes(SECRET)  # every evaluator here: the same hidden seeds
        ev = Evaluator(EvaluatorConfig(state, None, workers=1), _registry(**session))
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.stop()


def _open(ev: Evaluator, n: int = 1) -> Session:
    return ev.sessions.open(ev.task(TASK), EVAL, n, RUN)


def _null(s: Session) -> np.ndarray:
    """Zeros: this task's null action (its bounds hold 0; checked below)."""
    return np.zeros(s.action_shape, s.action_dtype)


@pytest.fixture
def reference(make_ev: MakeEv) -> EvalResult:
    """An agent that plays the null action to the end of every episode."""
    ev = make_ev("reference")
    s = _open(ev)
    s.reset([])
    while not s.eval_complete:
        s.step(_null(s))
    ev.sessions.close(s.id)
    return ev.result("", RUN)


def _same_as_reference(res: EvalResult, reference: EvalResult, agent_steps: list[int]) -> None:
    assert res.state == "SUCCEEDED", res.failure_reason
    assert res.metrics == reference.metrics
    strip = {"abandoned", "agent_steps"}
    assert [e.model_dump(exclude=strip) for e in res.episodes] == [
        e.model_dump(exclude=strip) for e in reference.episodes
    ]
    assert [e.agent_steps for e in res.episodes] == agent_steps
    # abandoned exactly where the agent stopped short of the episode's end
    assert [e.abandoned for e in res.episodes] == [
        k < e.length for k, e in zip(agent_steps, res.episodes, strict=True)
    ]


def _start(ev: Evaluator, steps: int = 2) -> Session:
    s = _open(ev)
    s.reset([])
    for _ in range(steps):
        s.step(_null(s))
    return s


def test_reset_mid_episode(make_ev: MakeEv, reference: EvalResult) -> None:
    ev = make_ev("reset")
    s = _start(ev)
    for _ in range(s.budget - 1):
        s.reset([])  # the first abandons episode 0 after 2 steps, the rest after 0
    while not s.eval_complete:
        s.step(_null(s))
    last = reference.episodes[-1].length
    _same_as_reference(ev.result("", RUN), reference, [2] + [0] * 8 + [last])


def test_close_session(make_ev: MakeEv, reference: EvalResult) -> None:
    ev = make_ev("close")
    s = _start(ev)
    assert ev.sessions.close(s.id) == s.budget  # the answer covers the whole budget
    _same_as_reference(ev.result("", RUN), reference, [2] + [0] * 9)


def test_agent_exit_then_harness_closes_the_run(make_ev: MakeEv, reference: EvalResult) -> None:
    ev = make_ev("exit")
    _start(ev)
    assert ev.sessions.close_run(RUN, "the agent exited") == 1
    _same_as_reference(ev.result("", RUN), reference, [2] + [0] * 9)


def test_idle_timeout_reap(make_ev: MakeEv, reference: EvalResult) -> None:
    ev = make_ev("reap", idle_timeout_s=0.05)
    s = _start(ev)
    time.sleep(0.1)
    assert ev.sessions.reap() == [s.id]
    assert ev.sessions.wait_closed(30)
    _same_as_reference(ev.result("", RUN), reference, [2] + [0] * 9)


def test_never_started(make_ev: MakeEv, reference: EvalResult) -> None:
    ev = make_ev("never")
    s = _open(ev, n=3)
    ev.sessions.close(s.id)
    res = ev.result("", RUN)
    _same_as_reference(res, reference, [0] * 10)
    assert all(e.abandoned for e in res.episodes)


def test_finished_episode_is_not_abandoned(make_ev: MakeEv, reference: EvalResult) -> None:
    ev = make_ev("finished")
    s = _open(ev)
    s.reset([])
    while not s.step(_null(s)).terminated[0]:
        pass
    ev.sessions.close(s.id)  # episode 0 ended on the agent's own last step
    first = reference.episodes[0].length
    _same_as_reference(ev.result("", RUN), reference, [first] + [0] * 9)


class _SlowStepper:
    """Wraps a session's stepper so that each step takes ``delay`` seconds (a long completion),
    and, given a ``gate``, waits for it first (a completion that lasts until the test says)."""

    def __init__(
        self,
        stepper: Any,
        delay: float,
        fail_after: int | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        self._stepper, self._delay, self._fail_after, self.steps = stepper, delay, fail_after, 0
        self._gate = gate
        self.waiting = threading.Event()
        """Set once a step waits at the gate: the completion is under way."""

    def step(self, which: Any, action: Any) -> Any:
        if self._gate is not None:
            self.waiting.set()
            assert self._gate.wait(120), "the test never opened the gate"
        time.sleep(self._delay)
        self.steps += 1
        if self._fail_after is not None and self.steps > self._fail_after:
            raise RuntimeError("simulator crashed")
        return self._stepper.step(which, action)

    def reset(self, which: Any, seeds: Any) -> Any:
        return self._stepper.reset(which, seeds)


def _slow(
    s: Session, delay: float, fail_after: int | None = None, gate: threading.Event | None = None
) -> _SlowStepper:
    s._stepper = slow = _SlowStepper(s._stepper, delay, fail_after, gate)
    return slow


def test_completion_blocks_no_other_session(make_ev: MakeEv) -> None:
    """The completion is held at a gate until the other sessions were served: they were
    served while it ran (an event, not a guess of how fast this host serves them)."""
    ev = make_ev("busy")
    s = _start(ev, steps=0)
    gate = threading.Event()
    slow = _slow(s, 0.0, gate=gate)
    other = ev.sessions.open(ev.task(TASK), PRACTICE, 1, "")
    closing = threading.Thread(target=ev.sessions.close, args=(s.id,))
    closing.start()
    assert slow.waiting.wait(60), "the completion never started"
    opened: list[Session] = []

    def serve_others() -> None:
        ev.sessions.call(other.id, 1.0, lambda x: x.reset([0]))
        opened.append(ev.sessions.open(ev.task(TASK), PRACTICE, 1, ""))  # reaps on its way

    others = threading.Thread(target=serve_others)
    others.start()
    others.join(60)  # blocked by the completion, they would wait for the gate: forever
    blocked, completing = others.is_alive(), closing.is_alive()
    gate.set()
    others.join()
    assert not blocked, "another session waited for the completion"
    assert opened and completing  # served while the completion was held at the gate
    third = opened[0]
    closing.join()
    assert ev.result("", RUN).state == "SUCCEEDED"
    ev.sessions.close(other.id)
    ev.sessions.close(third.id)


def test_shutdown_waits_for_a_completion_within_its_grace(make_ev: MakeEv) -> None:
    ev = make_ev("grace", idle_timeout_s=0.05)
    s = _start(ev)
    _slow(s, 0.005)
    time.sleep(0.1)
    assert ev.sessions.reap() == [s.id]  # completing on its own thread
    ev.sessions.stop()
    assert ev.result("", RUN).state == "SUCCEEDED"


def test_shutdown_past_the_grace_fails_closed(make_ev: MakeEv) -> None:
    ev = make_ev("abort", idle_timeout_s=0.05)
    s = _start(ev)
    _slow(s, 0.05)
    time.sleep(0.1)
    ev.sessions.finish_grace_s = 0.1
    assert ev.sessions.reap() == [s.id]
    ev.sessions.stop()
    res = ev.result("", RUN)
    assert (res.state, res.failure_source) == ("FAILED", "infrastructure")
    assert "shut down while completing" in res.failure_reason
    assert res.metrics == {}


def test_an_env_failing_during_completion_is_an_infrastructure_failure(make_ev: MakeEv) -> None:
    ev = make_ev("crash")
    s = _start(ev)
    _slow(s, 0.0, fail_after=3)
    ev.sessions.close(s.id)
    res = ev.result("", RUN)
    assert (res.state, res.failure_source) == ("FAILED", "infrastructure")
    assert "could not complete" in res.failure_reason and "RuntimeError" in res.failure_reason


def test_null_action_is_zero_or_the_centre_of_the_bounds() -> None:
    from ale_robotics.evaluator.sessions.envs import null_action

    low = np.array([-1.0, 1.0, 2.0, -np.inf, -np.inf, -3.0])
    high = np.array([1.0, 3.0, np.inf, -1.0, np.inf, 0.0])
    got = null_action(low, high, np.dtype(np.float32))
    assert got.dtype == np.float32
    assert got.tolist() == [0.0, 2.0, 2.0, -1.0, 0.0, 0.0]
    assert null_action([1], [4], np.dtype(np.int64)).tolist() == [2]


def test_the_sessions_null_action_is_this_tasks_zero(make_ev: MakeEv) -> None:
    s = _open(make_ev("null"))
    assert s.null_action.dtype == s.action_dtype and s.null_action.tolist() == [0.0]
