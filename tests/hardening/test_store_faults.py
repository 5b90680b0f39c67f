"""A fault of the evaluator's storage during a submission is the infrastructure's, never a
score of 0 charged to the agent (issue 26, point 7).

The attack (or accident): the state dir's disk fills up. SubmitBatchEval met SQLite's
"database or disk is full", logged it as a bug and answered INTERNAL; the run then ended
``completed``, exit 0, score 0, "the agent exited ... without calling SubmitBatchEval",
although it had called it. Now the store's fault is UNAVAILABLE, the evaluator remembers
that a fault stopped the run's submission, and the harness ends the run ``failed``
(exit 1) with the fault named.

Real faults: SQLite's own page limit for the store unit test, and real full file
systems (a tmpfs with a size cap, mounted here; skipped where mounting is not allowed).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import RUN, TASK_ID, official, write_policy
from helpers import random_weights

from ale_robotics.client import AleClient
from ale_robotics.errors import UnavailableError
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.evaluator.store import StoreUnavailable
from ale_robotics.evaluator.store.sqlite import SqliteJobStore
from ale_robotics.tasks import Registry, TaskSpec

CLI = [sys.executable, "-m", "ale_robotics"]


def test_a_full_sqlite_store_raises_unavailable_not_a_raw_sqlite_error(tmp_path: Path) -> None:
    """SQLite's page limit makes a real SQLITE_FULL ("database or disk is full")."""
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    try:
        (pages,) = store.dialect.connection.execute("PRAGMA page_count").fetchone()
        store.dialect.connection.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreUnavailable) as info:
            for i in range(1000):
                store.create(
                    run_id="r",
                    task_id="t",
                    client_token=f"c{i}",
                    episodes_total=1,
                    files={"x" * 2000: "0" * 64},
                )
        assert isinstance(info.value, UnavailableError)  # UNAVAILABLE on the wire
        assert "database or disk is full" in info.value.fault
        assert str(tmp_path) not in info.value.fault  # what an agent may read names no path
        assert store.latest_for_run("r") is not None  # reads still work; nothing half-written
        store.dialect.connection.execute("PRAGMA max_page_count = 1073741823")
        store.create(run_id="r", task_id="t", client_token="after", episodes_total=1, files={})
    finally:
        store.close()


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path``, unmounted afterwards; skips where mounting is refused."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs (a real full file system)")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(directory: Path) -> Path:
    """Write one file until its file system is full; returns it (delete it to free the space)."""
    filler = directory / "filler"
    chunk = b"\0" * (64 * 1024)
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(chunk)
            fh.flush()
    # the last partial pages too
    with open(filler, "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 512)
    return filler


def test_a_submission_into_a_full_job_store_is_an_infrastructure_failure(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    """The job store on a full disk: the agent gets UNAVAILABLE (not INTERNAL), the run's
    newest job reads FAILED / INFRASTRUCTURE on the harness channel, and a retry that gets
    through once space is back takes its place."""
    volume = short_tmp / "vol"
    write_policy(volume, random_weights(task))
    with _tmpfs(short_tmp / "disk", "1m") as disk:
        ev = serve(
            EvaluatorConfig(
                short_tmp / "state",
                volume,
                task_id=TASK_ID,
                run_id=RUN,
                workers=1,
                store_url=str(disk / "jobs.sqlite3"),
            ),
            agent_listen=f"unix://{short_tmp}/a/a.sock",
            harness_listen=f"unix://{short_tmp}/h.sock",
            registry=registry,
        )
        try:
            filler = _fill(disk)
            with AleClient(ev.agent_address, ev.agent_token, run_id=RUN) as agent:
                with pytest.raises(UnavailableError) as info:
                    agent.submit(client_token="first")  # the SDK retried 3 times already
                assert "not a rejection" in info.value.message
                assert "database or disk is full" in info.value.message
                assert str(disk) not in info.value.message and str(short_tmp) not in (
                    info.value.message
                )
                with AleClient(ev.harness_address, ev.harness_token, run_id=RUN) as h:
                    newest = h.status()
                    assert newest.state == "FAILED"
                    assert newest.failure_source == "infrastructure"
                    assert "database or disk is full" in newest.failure_reason
                    result = official(ev.harness_address, ev.harness_token, newest.job_id)
                    assert result.failure_source == "infrastructure"
                    filler.unlink()  # space is back: the agent's retry gets through
                    job_id = agent.submit(client_token="first")
                    assert h.status().job_id == job_id != newest.job_id
                    assert agent.wait(job_id, timeout_s=120).state == "SUCCEEDED"
        finally:
            ev.stop(grace=0.5)


FILLING_AGENT = """
import contextlib, sys
from pathlib import Path
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
spec = c.get_spec()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype) for r in spec.contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
# another process fills the evaluator's disk (here, this one: it runs unsandboxed)
with open(sys.argv[1], "wb", buffering=0) as fh, contextlib.suppress(OSError):
    while True:
        fh.write(b"\\0" * 4096)
try:
    print("job:", c.submit())
except Exception as exc:
    print("submit failed:", type(exc).__name__, exc)
    sys.exit(3)
"""


def test_a_run_whose_state_dir_disk_is_full_fails_and_is_never_scored(short_tmp: Path) -> None:
    """``ale-robotics run`` end to end, its state dir on a full file system: ``failed``,
    exit 1, the fault named; before, ``completed``, exit 0, score 0, "no submission"."""
    with _tmpfs(short_tmp / "disk", "4m") as disk:
        agent = short_tmp / "agent.py"
        agent.write_text(textwrap.dedent(FILLING_AGENT))
        proc = subprocess.run(
            [
                *CLI,
                "run",
                TASK_ID,
                "--agent",
                f"{sys.executable} {agent} {disk / 'filler'}",
                "--sandbox",
                "none",
                "--run-dir",
                str(short_tmp / "run"),
                "--state-dir",
                str(disk / "state"),
                "--workers",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=short_tmp,
        )
    log = (short_tmp / "run" / "agent.log").read_text()
    assert "submit failed: UnavailableError" in log, log
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["state"] == "failed"
    assert "infrastructure" in result["reason"]
    assert "No space left on device" in result["reason"] or "full" in result["reason"]
    assert "score" not in result or not result.get("score")
