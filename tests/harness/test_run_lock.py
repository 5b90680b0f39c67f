"""The harness's lock on its run directory (harness/run_lock.py): a run still going is
told from one whose harness died, by processes other than the harness."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ale_robotics.harness.run_lock import harness_alive, held_by_harness

HOLDER = """
import sys, time
from pathlib import Path
from ale_robotics.harness.run_lock import held_by_harness
with held_by_harness(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_held_in_this_process_is_alive_to_another_open(tmp_path: Path) -> None:
    assert not harness_alive(tmp_path)
    with held_by_harness(tmp_path):
        assert harness_alive(tmp_path)
        with pytest.raises(BlockingIOError), held_by_harness(tmp_path):
            pass  # a second harness in the same directory
    assert not harness_alive(tmp_path)


def test_a_missing_directory_has_no_harness(tmp_path: Path) -> None:
    assert not harness_alive(tmp_path / "nope")


def test_a_harness_killed_with_sigkill_leaves_its_run_lost(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert harness_alive(tmp_path)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while harness_alive(tmp_path):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()


def test_the_agent_does_not_inherit_the_lock(tmp_path: Path) -> None:
    """A child started while the lock is held (the agent) does not keep it once the
    holder is gone: the descriptor is close-on-exec."""
    with held_by_harness(tmp_path):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not harness_alive(tmp_path)
    finally:
        child.kill()
        child.wait()
