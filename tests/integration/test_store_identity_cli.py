"""Replicas must share one state dir (issue 31): real ``evaluator serve`` processes.

One started with another ``--state-dir`` on the same ``--store`` used to join silently,
claim jobs and fail them all ("cannot read the snapshot"). Now it exits 2 with one line
naming both state dirs and both fingerprints, before it listens or claims anything; one
started with the same state dir serves beside the first. On SQLite (a shared file) and
on a real PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg import PgCluster, pg_cluster

from ale_robotics.client import AleClient
from ale_robotics.errors import AleError

__all__ = ["pg_cluster"]

CLI = [sys.executable, "-m", "ale_robotics", "evaluator", "serve"]


class _Serve:
    """``evaluator serve`` on ``state`` and ``store``, its sockets named ``name``."""

    def __init__(self, tmp: Path, name: str, state: Path, store: str) -> None:
        self.state = state
        self.agent = f"unix://{tmp}/{name}-a.sock"
        self.harness = tmp / f"{name}-h.sock"
        self.log = tmp / f"{name}.log"
        (tmp / "vol").mkdir(exist_ok=True)
        cmd = [
            *CLI,
            *("--state-dir", str(state), "--store", store, "--submission-dir", str(tmp / "vol")),
            *("--agent-listen", self.agent, "--harness-listen", f"unix://{self.harness}"),
            *("--task", "td3-inverted-pendulum-v1", "--workers", "1"),
        ]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> None:
        deadline = time.monotonic() + 90
        token_file = self.state / "agent.token"
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            if token_file.exists():
                with contextlib.suppress(AleError):
                    with AleClient(self.agent, token_file.read_text().strip(), timeout_s=5) as c:
                        c.get_spec()
                    return
            time.sleep(0.05)
        raise TimeoutError(f"the evaluator did not become ready: {self.output()}")

    def reap(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def started() -> Iterator[list[_Serve]]:
    procs: list[_Serve] = []
    yield procs
    for p in procs:
        p.reap()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, short_tmp: Path) -> str:
    if request.param == "sqlite":
        return str(short_tmp / "shared.sqlite3")
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database()


def test_a_replica_with_another_state_dir_is_refused_naming_both(
    short_tmp: Path, store: str, started: list[_Serve]
) -> None:
    first = _Serve(short_tmp, "a", short_tmp / "state-a", store)
    started.append(first)
    first.ready()
    other = _Serve(short_tmp, "b", short_tmp / "state-b", store)
    started.append(other)
    assert other.proc.wait(timeout=90) == 2, other.output()
    out = other.output().strip()
    assert "Traceback" not in out, out
    (line,) = [ln for ln in out.splitlines() if ln.strip()]  # one line
    for state in ("state-a", "state-b"):
        assert str(short_tmp / state) in line, line
    assert line.count("secret fingerprint") == 2 and line.count("key ") >= 2, line
    assert "same state dir" in line
    assert not other.harness.exists()  # it never listened
    # the same state dir serves beside the first
    again = _Serve(short_tmp, "c", short_tmp / "state-a", store)
    started.append(again)
    again.ready()
    assert first.proc.poll() is None
