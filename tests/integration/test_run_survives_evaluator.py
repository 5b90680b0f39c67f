"""A run on a separate evaluator survives that evaluator's restart, and is never left
unrecorded by one that does not come back (issue 31).

Real processes: ``evaluator serve`` (shared, SQLite store) and ``ale-robotics run
--evaluator`` with a scripted agent that submits the pendulum checkpoint and exits.
The evaluator is SIGKILLed (its whole process group, workers included) while the job
runs, its rollout worker stopped first so that the kill surely lands mid-job:

* restarted 0.5 s later on the same state dir, socket paths and store, it takes the
  job over once the dead process's lease has run out and finishes it (attempt 2); the
  harness waits it out (``--evaluator-retry-s``) and records a scored run, exit 0;
* never restarted, the harness gives up after its retry window: ``result.json`` says
  ``failed`` with the cause and how long it waited, exit 1.

And two replicas on one PostgreSQL job store, a run on each, the database restarted
(6 s down) while their jobs run: both replicas live on, both runs are scored.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import child_pids
from pg import find_bin_dir, start_cluster

from ale_robotics.client import AleClient
from ale_robotics.errors import AleError

CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
CHECKPOINT = (
    Path(__file__).resolve().parents[2]
    / "examples"
    / "agents"
    / "checkpoints"
    / TASK_ID
    / "policy.safetensors"
)
AGENT = f"""
import os, shutil
from ale_robotics.client import AleClient
client = AleClient.from_env()
client.retry_window_s = 60  # an agent that rides out an outage too (its own choice)
volume = os.environ["ALE_SUBMISSION_DIR"]
shutil.copy({str(CHECKPOINT)!r}, os.path.join(volume, "policy.safetensors"))
print("submitted", client.submit(), flush=True)
"""
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "ALE_VIDEOS": "0"}


class Serve:
    """``evaluator serve`` (shared) in a session of its own; :meth:`start` again after a kill.

    Replicas (``name``) share the state dir and volume, each with its own sockets; a
    ``--store`` is given in ``extra``.
    """

    def __init__(
        self, tmp: Path, name: str = "a", extra: tuple[str, ...] = (), *, tcp: bool = False
    ) -> None:
        self.tmp = tmp
        self.name = name
        self.extra = extra
        self.state = tmp / "state"
        self.volume = tmp / "vol"
        self.volume.mkdir(exist_ok=True)
        if tcp:  # loopback ports, as replicas on hosts of their own would listen
            self.agent_address = f"127.0.0.1:{_free_port()}"
            self.harness_address = f"127.0.0.1:{_free_port()}"
        else:
            self.agent_address = f"unix://{tmp}/{name}-a.sock"
            self.harness_address = f"unix://{tmp}/{name}-h.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        cmd = [
            *CLI,
            "evaluator",
            "serve",
            "--state-dir",
            str(self.state),
            "--submission-dir",
            str(self.volume),
            "--agent-listen",
            self.agent_address,
            "--harness-listen",
            self.harness_address,
            "--task",
            TASK_ID,
            "--workers",
            "1",
            "--job-lease-s",
            "2",
            *self.extra,
        ]
        with open(self.tmp / f"serve-{self.name}-{self.starts}.log", "ab") as fh:
            self.proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=ENV, start_new_session=True
            )
        deadline = time.monotonic() + 90
        token_file = self.state / "agent.token"
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            if token_file.exists():
                with contextlib.suppress(AleError):
                    token = token_file.read_text().strip()
                    with AleClient(self.agent_address, token, timeout_s=5) as c:
                        c.get_spec()
                    return
            time.sleep(0.05)
        raise TimeoutError(f"the evaluator did not become ready:\n{self.output()}")

    def freeze_job(self) -> None:
        """Stop (SIGSTOP) the rollout worker once the job runs: the job stays unfinished."""
        assert self.proc is not None
        pid = self.proc.pid
        _wait_for(lambda: self._job_states() == ["RUNNING"], "the job to start running")
        # the workers are spawned once the job runs: stop them as soon as they are there
        _wait_for(lambda: child_pids(pid, marker=b"spawn_main"), "the rollout worker", 60)
        for worker in child_pids(pid, marker=b"spawn_main"):
            os.kill(worker, signal.SIGSTOP)

    def kill_mid_job(self) -> None:
        """SIGKILL the whole process group while a job runs (its worker stopped first)."""
        assert self.proc is not None
        self.freeze_job()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def _job_states(self) -> list[str]:
        if "--store" in self.extra:
            return _pg_job_states(self.extra[self.extra.index("--store") + 1])
        db = self.state / "jobs.sqlite3"
        if not db.exists():
            return []
        with contextlib.closing(sqlite3.connect(db, timeout=5)) as con:
            return [r[0] for r in con.execute("SELECT state FROM jobs")]

    def attempts(self) -> list[int]:
        with contextlib.closing(sqlite3.connect(self.state / "jobs.sqlite3", timeout=5)) as con:
            return [int(r[0]) for r in con.execute("SELECT attempts FROM jobs")]

    def output(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.tmp.glob(f"serve-{self.name}-*.log"))
        )

    def reap(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(ok: object, what: str, timeout: float = 120.0) -> None:
    assert callable(ok)
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path)
    s.start()
    yield s
    s.reap()


def _harness(
    serve: Serve, tmp: Path, retry_s: float, name: str = "run", *, also: Serve | None = None
) -> subprocess.Popen[str]:
    """``ale-robotics run`` on ``serve`` (and, listed after it, replica ``also``)."""
    agent = tmp / "agent.py"
    agent.write_text(AGENT)
    agents = ",".join(s.agent_address for s in (serve, also) if s is not None)
    harnesses = ",".join(s.harness_address for s in (serve, also) if s is not None)
    cmd = [
        *CLI,
        "run",
        TASK_ID,
        "--agent",
        f"{sys.executable} {agent}",
        "--sandbox",
        "none",
        "--evaluator",
        agents,
        "--evaluator-harness",
        harnesses,
        "--harness-token-file",
        str(serve.state / "harness.token"),
        "--submission-dir",
        str(serve.volume),
        "--run-dir",
        str(tmp / name),
        "--evaluator-retry-s",
        str(retry_s),
        "--no-videos",
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, cwd=tmp
    )


@pytest.mark.slow
def test_an_evaluator_killed_and_restarted_mid_job_loses_no_run(
    serve: Serve, tmp_path: Path
) -> None:
    harness = _harness(serve, tmp_path, retry_s=120)
    serve.kill_mid_job()
    time.sleep(0.5)
    serve.start()
    out, _ = harness.communicate(timeout=240)
    assert harness.returncode == 0, out + serve.output()
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["state"] == "completed", result
    assert result["score"]["status"] == "scored", result["score"]
    assert serve.attempts() == [2], "the restarted evaluator re-ran the job once"
    assert "retrying for up to 120 s" in out


@pytest.mark.slow
def test_an_evaluator_that_never_comes_back_fails_the_run_with_its_record(
    serve: Serve, tmp_path: Path
) -> None:
    harness = _harness(serve, tmp_path, retry_s=3)
    serve.kill_mid_job()
    out, _ = harness.communicate(timeout=120)
    assert harness.returncode == 1, out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["state"] == "failed", result
    assert "--evaluator-retry-s 3" in result["reason"], result["reason"]
    assert "retried for" in result["reason"], result["reason"]
    last = (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()[-1]
    assert json.loads(last)["kind"] == "run_failed"


def _pg_job_states(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [str(r[0]) for r in conn.execute("SELECT state FROM jobs").fetchall()]


@pytest.mark.slow
def test_a_job_store_restarted_mid_job_loses_no_run(tmp_path: Path) -> None:
    """Two replicas on one PostgreSQL, a run on each; the database is restarted (6 s
    down) while their jobs run: both replicas live on and both runs are scored."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (make postgres-deps)")
    cluster = start_cluster(bin_dir)
    replicas: list[Serve] = []
    try:
        url = cluster.create_database()
        replicas += [Serve(tmp_path, name, ("--store", url)) for name in ("a", "b")]
        for r in replicas:
            r.start()
        runs = [_harness(r, tmp_path, retry_s=120, name=f"run-{r.name}") for r in replicas]
        _wait_for(lambda: "RUNNING" in _pg_job_states(url), "a job to start running")
        cluster.restart(down_s=6)
        for r, proc in zip(replicas, runs, strict=True):
            out, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0, out + r.output()
            result = json.loads((tmp_path / f"run-{r.name}" / "result.json").read_text())
            assert result["state"] == "completed", result
            assert result["score"]["status"] == "scored", result["score"]
        for r in replicas:
            assert r.proc is not None and r.proc.poll() is None, r.output()
        assert sorted(_pg_job_states(url)) == ["SUCCEEDED", "SUCCEEDED"]
    finally:
        for r in replicas:
            r.reap()
        cluster.stop()


@pytest.mark.slow
def test_a_replica_killed_mid_job_hands_its_run_to_another(tmp_path: Path) -> None:
    """A run opened on replica A (TCP, the first of ``--evaluator A,B``), its job running
    on A; B starts; A is SIGKILLed: B takes the job over once A's lease ran out, the
    harness's relays fail over to B, and the run is scored there."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (make postgres-deps)")
    cluster = start_cluster(bin_dir)
    a = b = None
    try:
        url = cluster.create_database()
        a = Serve(tmp_path, "a", ("--store", url), tcp=True)
        b = Serve(tmp_path, "b", ("--store", url), tcp=True)
        a.start()
        run = _harness(a, tmp_path, retry_s=120, also=b)
        a.freeze_job()
        b.start()
        a.kill_mid_job()
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, out + a.output() + b.output()
        result = json.loads((tmp_path / "run" / "result.json").read_text())
        assert result["state"] == "completed", result
        assert result["score"]["status"] == "scored", result["score"]
        assert _pg_job_states(url) == ["SUCCEEDED"]
        assert "requeued 1 job" in b.output()  # B took A's job over
    finally:
        for r in (a, b):
            if r is not None:
                r.reap()
        cluster.stop()
