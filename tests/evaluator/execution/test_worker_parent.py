"""Rollout workers die with their parent, busy or idle (issue 31).

Workers ignore SIGTERM and SIGINT (their parent stops them), so a parent killed with
SIGKILL used to leave them alive for good, orphaned, holding their memory. A real
parent process starts a real local executor here and is killed with SIGKILL while its
workers are idle, or in the middle of long episodes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

PARENT = textwrap.dedent(
    """
    import sys, threading, time
    from execution_helpers import stable_weights
    from ale_robotics.evaluator.execution import LocalExecutor
    from ale_robotics.tasks import default_registry

    task = default_registry().get("td3-inverted-pendulum-v1")  # shards of 5 episodes
    ex = LocalExecutor(workers=2)
    ex.run(task, stable_weights(task), list(range(10)))  # two shards: both workers up
    if sys.argv[1] == "busy":  # thousands of 1000-step episodes: busy for minutes
        threading.Thread(target=ex.run, args=(task, stable_weights(task), list(range(4000))),
                         daemon=True).start()
        time.sleep(1.5)  # the episodes are under way
    print(" ".join(map(str, ex.worker_pids())), flush=True)
    threading.Event().wait()
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("phase", ["idle", "busy"])
def test_workers_die_when_their_parent_is_killed(phase: str) -> None:
    here = Path(__file__).resolve().parent  # execution_helpers, and the helpers it imports
    path = os.pathsep.join(str(d) for d in (here, here.parents[1]))
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, phase],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert proc.stdout is not None
    workers = [int(p) for p in proc.stdout.readline().split()]
    assert len(workers) == 2 and all(_alive(w) for w in workers)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:  # never leave them behind, whatever the outcome
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived their parent"


def test_the_watch_leaves_the_workers_their_namespaces() -> None:
    """The watch thread starts after the worker's limits: unshare(CLONE_NEWUSER) is refused
    to a process with threads, and a worker would then keep the host network."""
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).unshare(0x10000000))"
    if subprocess.run([sys.executable, "-c", probe], check=False).returncode != 0:
        pytest.skip("this kernel refuses unprivileged user namespaces")
    from ale_robotics.evaluator.execution import LocalExecutor

    pool = LocalExecutor(1)
    try:
        assert pool.run_in_worker(os.getuid) == 65534  # its own user (and network) namespace
    finally:
        pool.shutdown()
