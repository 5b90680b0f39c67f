"""The agent phase goes on the moment the agent exits, and still stops at once on a signal.

The supervisor's loop sleeps between passes; :func:`.supervisor._exit_event` wakes it when
the agent's process exits (a pidfd, which reaps nothing: ``Popen.poll`` still gets the
exit status), and :meth:`StopRequest.sleep` wakes on that event or on a stop request.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from ale_robotics.harness.agent.supervisor import _exit_event
from ale_robotics.harness.interrupt import RunInterrupted, StopRequest

pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here")


@pidfd
def test_the_exit_event_is_set_when_the_process_exits_and_poll_gets_its_status() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(7)"]
    )
    exited = _exit_event(proc)
    assert not exited.is_set()
    assert exited.wait(30)
    assert proc.poll() == 7  # the watcher reaped nothing


@pidfd
def test_a_sleep_with_wake_returns_when_the_agent_exits_not_at_the_next_pass() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    exited = _exit_event(proc)
    start = time.monotonic()
    StopRequest().sleep(60.0, wake=exited)  # returns without raising
    assert time.monotonic() - start < 30
    assert proc.wait(30) == 0


def test_a_stop_request_wakes_a_sleep_with_wake_and_raises() -> None:
    stop, wake = StopRequest(), threading.Event()
    threading.Timer(0.2, stop.request, args=("SIGTERM",)).start()
    start = time.monotonic()
    with pytest.raises(RunInterrupted) as caught:
        stop.sleep(60.0, wake=wake)
    assert time.monotonic() - start < 30
    assert caught.value.signal_name == "SIGTERM"


def test_a_stop_requested_before_the_sleep_raises_at_once() -> None:
    stop = StopRequest()
    stop.request("SIGINT")
    start = time.monotonic()
    with pytest.raises(RunInterrupted):
        stop.sleep(60.0, wake=threading.Event())
    assert time.monotonic() - start < 30
