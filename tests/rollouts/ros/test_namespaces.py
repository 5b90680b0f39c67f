"""The graph's namespaces (rollouts/ros/namespaces.py), with plain processes: no ROS needed.

What every graph relies on: its loopback is its own (a port bound there is not the host's,
and nothing there reaches the host's), and one SIGKILL to its ``unshare`` ends every
process in it, a detached grandchild included, as does the death of the process that
started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import ros_support

from ale_robotics.rollouts.ros import namespaces

PROBLEM = namespaces.check()
pytestmark = pytest.mark.skipif(
    PROBLEM is not None, reason=f"no namespaces for a graph here: {PROBLEM}"
)


def _in_graph_namespaces(code: str, marker: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["unshare", "--fork", "--kill-child", "--", sys.executable, "-c", textwrap.dedent(code)],
        preexec_fn=namespaces.enter,  # the namespaces are made there
        env={**os.environ, "ALE_TEST_MARKER": marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_the_loopback_is_the_graph_s_own() -> None:
    """Inside, the roscore port binds even while the host's is taken, and the host's
    loopback (a listener of this test) cannot be reached."""
    with socket.socket() as host:
        host.bind(("127.0.0.1", 0))
        host.listen()
        port = host.getsockname()[1]
        proc = _in_graph_namespaces(
            f"""
            import socket
            s = socket.socket(); s.bind(("127.0.0.1", 11311)); s.listen()
            socket.create_connection(("127.0.0.1", 11311)).close()
            print("own port bound")
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5)
                print("reached the host")
            except OSError as exc:
                print("host unreachable:", type(exc).__name__)
            """,
            "loopback",
        )
        out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0, out
    assert "own port bound" in out
    assert "host unreachable: ConnectionRefusedError" in out  # its own loopback: no listener


_DETACHED = """
import os, sys, time
if os.fork() == 0:
    os.setsid()  # a detached grandchild, as a daemonizing node would make
    if os.fork() == 0:
        time.sleep(600)
        sys.exit(0)
    sys.exit(0)
print("up", flush=True)
time.sleep(600)
"""


def _wait_up(proc: subprocess.Popen[bytes], marker: str) -> list[int]:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"up"
    return ros_support.wait_for(
        "the namespace's processes",
        lambda: (
            len(found := ros_support.processes_with(f"ALE_TEST_MARKER={marker}")) >= 3 and found
        ),
    )


def _cleanup(marker: str) -> None:
    """What a failed test left (so that it does not outlive the test)."""
    for pid in ros_support.processes_with(f"ALE_TEST_MARKER={marker}"):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_one_kill_ends_everything_inside() -> None:
    marker = f"kill-{os.getpid()}"
    proc = _in_graph_namespaces(_DETACHED, marker)
    try:
        inside = _wait_up(proc, marker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        ros_support.wait_for(
            "every process of the namespace to end",
            lambda: not any(ros_support.alive(p) for p in inside),
        )
    finally:
        _cleanup(marker)


def test_the_death_of_its_starter_ends_everything_inside(tmp_path: Path) -> None:
    """The evaluator's worker killed: the graph it started dies with it (PDEATHSIG)."""
    marker = f"starter-{os.getpid()}"
    starter = tmp_path / "starter.py"
    starter.write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, sys, time
            from ale_robotics.rollouts.ros import namespaces
            p = subprocess.Popen(
                ["unshare", "--fork", "--kill-child", "--", sys.executable, "-c", {_DETACHED!r}],
                preexec_fn=namespaces.enter,
                env={{**os.environ, "ALE_TEST_MARKER": {marker!r}}},
                stdout=subprocess.PIPE,
            )
            print(p.stdout.readline().decode().strip(), flush=True)
            time.sleep(600)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(starter)], stdout=subprocess.PIPE)
    try:
        inside = _wait_up(proc, marker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        ros_support.wait_for(
            "the namespace to end with its starter",
            lambda: not any(ros_support.alive(p) for p in inside),
        )
    finally:
        _cleanup(marker)
