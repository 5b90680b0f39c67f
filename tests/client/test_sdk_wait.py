"""``AleClient.wait``: the pace of its status polls (there is no push for a job's state)."""

from __future__ import annotations

import pytest

from ale_robotics.client import sdk
from ale_robotics.client.sdk import FIRST_POLL_S, AleClient, JobStatus, poll_interval


def test_the_interval_starts_short_and_grows_with_the_wait_up_to_the_given_one() -> None:
    assert poll_interval(0.0, 0.5) == FIRST_POLL_S
    assert poll_interval(0.4, 0.5) == FIRST_POLL_S  # a short job is seen within 50 ms
    assert poll_interval(2.0, 0.5) == pytest.approx(0.2)  # a tenth of the time waited
    assert poll_interval(60.0, 0.5) == 0.5  # a long one costs one call per poll_s
    assert poll_interval(60.0, 0.01) == 0.01  # a caller's shorter poll_s is kept


def _status(state: str) -> JobStatus:
    return JobStatus("job-1", "t", state, 0, 10, 0, "", "", 0.0)


def test_wait_polls_until_terminal_at_that_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    slept: list[float] = []
    states = iter(["QUEUED", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"])

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds + 0.5  # each poll also finds half a second gone

    monkeypatch.setattr(sdk.time, "sleep", sleep)
    monkeypatch.setattr(sdk.time, "monotonic", lambda: clock[0])
    client = AleClient.__new__(AleClient)  # no connection: status() is replaced
    monkeypatch.setattr(client, "status", lambda job_id="": _status(next(states)))
    seen: list[str] = []
    final = client.wait("job-1", on_progress=lambda st: seen.append(st.state))
    assert final.state == "SUCCEEDED"
    assert seen == ["QUEUED", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"]
    # waited 0, 0.55, 1.105, 1.7155 s before each sleep: 50 ms, then a tenth of that
    assert slept == pytest.approx([0.05, 0.055, 0.1105, 0.17155])
    assert slept[0] == FIRST_POLL_S and slept[-1] > FIRST_POLL_S


def test_wait_still_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(sdk.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(sdk.time, "monotonic", lambda: clock[0])
    client = AleClient.__new__(AleClient)
    monkeypatch.setattr(client, "status", lambda job_id="": _status("RUNNING"))
    with pytest.raises(TimeoutError, match="still RUNNING after 3s"):
        client.wait("job-1", timeout_s=3.0)


def test_a_poll_past_its_deadline_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness froze the agent while a host-timed job ran (a ROS graph's): the poll the
    freeze caught comes back past its deadline, and the next one finds the job done."""
    from ale_robotics.errors import DeadlineExceededError

    monkeypatch.setattr(sdk.time, "sleep", lambda s: None)
    answers: list[object] = [
        _status("RUNNING"),
        DeadlineExceededError("Deadline Exceeded"),
        _status("SUCCEEDED"),
    ]

    def status(job_id: str = "") -> JobStatus:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, JobStatus)
        return answer

    client = AleClient.__new__(AleClient)
    monkeypatch.setattr(client, "status", status)
    assert client.wait("job-1").state == "SUCCEEDED"


def test_an_evaluator_that_never_answers_still_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from ale_robotics.errors import DeadlineExceededError

    calls = []

    def status(job_id: str = "") -> JobStatus:
        calls.append(job_id)
        raise DeadlineExceededError("Deadline Exceeded")

    client = AleClient.__new__(AleClient)
    monkeypatch.setattr(client, "status", status)
    with pytest.raises(DeadlineExceededError):
        client.wait("job-1")
    assert len(calls) == sdk.LATE_POLLS + 1
