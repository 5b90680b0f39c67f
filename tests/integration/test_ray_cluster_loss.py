"""``evaluator serve --executor ray`` against a real Ray cluster that goes away (issue 31).

The Ray driver is a child process of the evaluator: a cluster stopped mid-job fails the job
as an infrastructure failure naming the cluster, the evaluator keeps serving, and once the
cluster is back a new job succeeds; a worker node lost mid-job costs the job one attempt.
Clusters here are ``ray start`` processes of the test's own temp dirs, stopped by SIGKILL of
exactly those processes (``ray stop --force`` would kill every Ray process on the host,
other tests' too).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import child_pids
from integration.test_evaluator_serve_cli import RUN, Served, _query, _until, _volume

from ale_robotics.client import AleClient

RAY = [str(Path(sys.executable).parent / "ray")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RayNode:
    """A ``ray start`` node (head, or joining ``head``) whose processes the test can kill."""

    def __init__(self, cpus: int, port: int | None = None, head: str | None = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="rt")  # short: Ray's socket paths
        self.cpus, self.port, self.head = cpus, port, head

    def start(self) -> None:
        where = ["--head", "--port", str(self.port)] if self.head is None else []
        join = ["--address", self.head] if self.head is not None else []
        subprocess.run(
            [*RAY, "start", *where, *join, "--num-cpus", str(self.cpus), "--disable-usage-stats",
             "--object-store-memory", str(100 * 1024**2), "--temp-dir", self.dir,
             *(["--include-dashboard", "false"] if self.head is None else [])],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def pids(self) -> list[int]:
        out = []
        for cmd in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                if self.dir.encode() in cmd.read_bytes():
                    out.append(int(cmd.parent.name))
        return out

    def kill(self) -> None:
        """``ray stop --force`` for this node only: SIGKILL to its processes."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def running_shards(self) -> bool:
        """Whether one of this node's Ray workers runs a shard (Ray names its process)."""
        for raylet in self.pids():
            with contextlib.suppress(OSError):
                if b"raylet" in Path(f"/proc/{raylet}/cmdline").read_bytes():
                    return bool(child_pids(raylet, marker=b"ale-robotics shard"))
        return False


@pytest.fixture
def served() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for s in started:
        s.reap()


@pytest.fixture
def nodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RayNode]]:
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # what `ray start` nodes use by default
    made: list[RayNode] = []
    yield made
    for node in made:
        node.kill()
        shutil.rmtree(node.dir, ignore_errors=True)


def _job(state: Path, token: str) -> tuple[str, int, str, str, int]:
    rows = _query(
        state,
        "SELECT state, attempts, failure_source, failure_reason, episodes_done FROM jobs "
        f"WHERE client_token = '{token}'",
    )
    return rows[0] if rows else ("", 0, "", "", 0)  # type: ignore[return-value]


def _serve(tmp: Path, served: list[Served], address: str) -> tuple[Served, str]:
    vol = _volume(tmp)
    assert vol.exists()
    ev = Served(tmp, "--run-id", RUN, "--executor", "ray", "--ray-address", address,
                "--workers", "2")  # fmt: skip
    served.append(ev)
    return ev, ev.ready()


def _submit(ev: Served, token: str, name: str) -> None:
    with AleClient(ev.agent_address, token, run_id=RUN, submission_dir=ev.tmp / "vol") as c:
        c.submit(client_token=name)


def _ended(ev: Served, name: str) -> bool:
    assert ev.proc.poll() is None, ev.output()[-3000:]
    return _job(ev.state, name)[0] not in ("", "QUEUED", "RUNNING")


@pytest.mark.slow  # two cluster starts, three jobs: about 60 s on two cores
def test_a_stopped_cluster_fails_the_job_and_the_evaluator_keeps_serving(
    short_tmp: Path, served: list[Served], nodes: list[RayNode]
) -> None:
    head = RayNode(2, port=_free_port())
    nodes.append(head)
    head.start()
    address = f"127.0.0.1:{head.port}"
    ev, token = _serve(short_tmp, served, address)
    _submit(ev, token, "lost")
    _until("the job runs", lambda: _job(ev.state, "lost")[0] == "RUNNING", 60)
    head.kill()
    _until("the job ends", lambda: _ended(ev, "lost"), 120, 0.1)
    state, attempts, source, reason, _ = _job(ev.state, "lost")
    assert (state, source) == ("FAILED", "infrastructure"), reason
    assert f"Ray cluster at {address}" in reason, reason
    assert attempts == 3, reason  # retried, each retry failing fast
    # the evaluator lives on and answers
    assert ev.proc.poll() is None
    with AleClient(ev.agent_address, token, timeout_s=10) as c:
        assert c.get_spec().task.id == "td3-inverted-pendulum-v1"
    # the cluster comes back: the next job gets a fresh driver and succeeds
    head.start()
    _submit(ev, token, "back")
    _until("the next job ends", lambda: _ended(ev, "back"), 180, 0.1)
    assert _job(ev.state, "back")[:2] == ("SUCCEEDED", 1), _job(ev.state, "back")


@pytest.mark.slow  # a two-node cluster and a job run twice: about 60 s on two cores
def test_a_lost_worker_node_costs_the_job_one_attempt(
    short_tmp: Path, served: list[Served], nodes: list[RayNode]
) -> None:
    head = RayNode(1, port=_free_port())
    nodes.append(head)
    head.start()
    address = f"127.0.0.1:{head.port}"
    worker = RayNode(1, head=address)
    nodes.append(worker)
    worker.start()
    ev, token = _serve(short_tmp, served, address)
    _submit(ev, token, "node")
    # both shards in flight: one on the head's CPU, the other on the worker node's
    _until("a shard runs on the worker node", worker.running_shards, 120, 0.02)
    worker.kill()
    _until("the job ends", lambda: _ended(ev, "node"), 180, 0.1)
    state, attempts, _, reason, done = _job(ev.state, "node")
    assert (state, attempts) == ("SUCCEEDED", 2), reason
    assert done == 10
    log = ev.output()
    assert log.count("failed (infrastructure)") == 1, log[-3000:]
