"""The client's retries (client/retry.py): the call's own few, and the harness's window.

Unit tests of :class:`RetryClock` on a fake clock, and real gRPC: a client with a retry
window reaches an evaluator that starts listening only after its first call failed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ale_robotics.client import AleClient
from ale_robotics.client import retry as retry_mod
from ale_robotics.client.retry import MAX_BACKOFF_S, RetryClock
from ale_robotics.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    UnavailableError,
)
from ale_robotics.evaluator import EvaluatorConfig
from ale_robotics.evaluator.server.listeners import serve


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    t = FakeTime()
    monkeypatch.setattr(retry_mod.time, "monotonic", t.monotonic)
    monkeypatch.setattr(retry_mod.time, "sleep", t.sleep)
    return t


def test_without_a_window_only_the_calls_own_retries_of_unavailable(fake: FakeTime) -> None:
    clock = RetryClock("e", retries=2, window_s=0)
    clock.wait_or_raise(UnavailableError("down"))
    clock.wait_or_raise(UnavailableError("down"))
    with pytest.raises(UnavailableError, match=r"^down$"):
        clock.wait_or_raise(UnavailableError("down"))
    assert fake.sleeps == [0.2, 0.4]


def test_a_deadline_is_not_retried_without_a_window(fake: FakeTime) -> None:
    with pytest.raises(DeadlineExceededError):
        RetryClock("e", retries=3, window_s=0).wait_or_raise(DeadlineExceededError("slow"))


def test_a_window_retries_a_gone_evaluator_until_spent_and_says_so(fake: FakeTime) -> None:
    clock = RetryClock("e", retries=0, window_s=30)
    with pytest.raises(UnavailableError) as info:
        while True:
            clock.wait_or_raise(UnavailableError("connection refused"))
    assert "retried for 3" in info.value.message  # 30-ish s, from the first failure
    assert "--evaluator-retry-s 30" in info.value.message
    assert max(fake.sleeps) == MAX_BACKOFF_S
    assert 30 <= sum(fake.sleeps) < 30 + MAX_BACKOFF_S
    clock = RetryClock("e", retries=0, window_s=30)
    clock.wait_or_raise(DeadlineExceededError("no answer"))  # a frozen host: retried too


def test_a_window_never_retries_an_answer(fake: FakeTime) -> None:
    with pytest.raises(InvalidArgumentError):
        RetryClock("e", retries=3, window_s=300).wait_or_raise(InvalidArgumentError("bad"))
    assert fake.sleeps == []


def test_a_client_with_a_window_reaches_an_evaluator_that_comes_up_late(
    tmp_path: Path,
) -> None:
    """Real gRPC on a Unix socket nobody listens on yet: the first tries are refused, the
    evaluator starts 1.5 s later, the call answers; without a window it fails at once."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "harness.token").write_text("t0ken\n")
    address = f"unix://{tmp_path}/h.sock"
    with (
        AleClient(address, "t0ken", task_id="td3-inverted-pendulum-v1") as c,
        pytest.raises(UnavailableError),
    ):
        c.get_spec()
    started: list[object] = []

    def late() -> None:
        time.sleep(1.5)
        started.append(
            serve(
                EvaluatorConfig(state, tmp_path / "vol", task_id="td3-inverted-pendulum-v1"),
                agent_listen=f"unix://{tmp_path}/a.sock",
                harness_listen=address,
            )
        )

    (tmp_path / "vol").mkdir()
    t = threading.Thread(target=late)
    t.start()
    try:
        with AleClient(address, "t0ken", task_id="td3-inverted-pendulum-v1") as c:
            c.retry_window_s = 60
            t0 = time.monotonic()
            assert c.get_spec().task.id == "td3-inverted-pendulum-v1"
            # after the evaluator came up (1.5 s in), within the 60 s retry window
            assert 1.4 < time.monotonic() - t0 < 60
    finally:
        t.join()
        for s in started:
            s.stop()  # type: ignore[attr-defined]
