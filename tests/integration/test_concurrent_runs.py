"""Two ``ale-robotics run`` processes on one state dir do not touch each other's jobs.

Every run embeds an evaluator on the same default state dir (one job store).
Before job leases, a run starting while another's job was RUNNING requeued that
job as if its process had died, and then ran it itself: the first run's
trajectory got a second validation and evaluation_started, its job two or
three attempts, and both runs took many times longer than one alone.

The pendulum job here takes about half a second, shorter than a run takes to
start, so "B starts while A's job runs" is arranged rather than hoped for: A's
rollout worker is paused (SIGSTOP) as soon as it appears, until B's evaluator
is up and B's agent has submitted; A's evaluator itself keeps running (and
renewing its lease) throughout. That is the moment the requeue used to happen.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from helpers import child_pids

CLI = [sys.executable, "-m", "ale_robotics"]
ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{sys.executable} {ROOT / 'examples' / 'agents' / 'submit_checkpoint.py'}"


def _start(tmp: Path, name: str, state: Path) -> tuple[subprocess.Popen[str], Path]:
    run_dir = tmp / name
    proc = subprocess.Popen(
        [
            *CLI,
            "run",
            "td3-inverted-pendulum-v1",
            "--agent",
            AGENT,
            "--run-dir",
            str(run_dir),
            "--state-dir",
            str(state),
            "--sandbox",
            "none",
            "--workers",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        start_new_session=True,
    )
    return proc, run_dir


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    return out, err


def _run_id(run_dir: Path) -> str | None:
    try:
        first = (run_dir / "trajectory.jsonl").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return str(json.loads(first)["run_id"])


def _job_states(state: Path, run_id: str) -> list[str]:
    db = state / "jobs.sqlite3"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT state FROM jobs WHERE run_id = ?", (run_id,)).fetchall()
    except sqlite3.OperationalError:  # the table is being created
        return []
    finally:
        con.close()
    return [r[0] for r in rows]


def _workers(pid: int) -> list[int]:
    """The rollout worker processes of evaluator ``pid``."""
    return child_pids(pid, marker=b"spawn_main")


def _check_run(run_dir: Path, stderr: str) -> None:
    """One attempt per job, as a run alone gets: one validation, one evaluation start."""
    events = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    per_job: dict[str, list[str]] = {}
    for e in events:
        job = e["payload"].get("job_id")
        if job:
            per_job.setdefault(job, []).append(e["kind"])
    assert per_job, "the run has no job events"
    for kinds in per_job.values():
        assert kinds.count("validation") == 1, kinds
        assert kinds.count("evaluation_started") == 1, kinds
    result = json.loads((run_dir / "result.json").read_text())
    assert result["eval_result"]["attempts"] == 1
    assert result["eval_result"]["state"] == "SUCCEEDED"
    assert "requeued" not in stderr


def test_two_runs_on_one_state_dir_leave_each_others_jobs_alone(tmp_path: Path) -> None:
    state = tmp_path / "state"

    t0 = time.monotonic()
    alone, alone_dir = _start(tmp_path, "alone", state)
    _, err = _finish(alone)
    alone_s = time.monotonic() - t0
    _check_run(alone_dir, err)

    t_a = time.monotonic()
    a, a_dir = _start(tmp_path, "a", state)
    started = [a]
    paused: list[int] = []
    try:
        # A's job RUNNING and its (first, freshly spawned) worker there: pause the worker
        deadline = time.monotonic() + 60
        while not paused:
            assert a.poll() is None and time.monotonic() < deadline, "A ended early"
            run_a = _run_id(a_dir)
            if run_a and _job_states(state, run_a) == ["RUNNING"]:
                paused = _workers(a.pid)
                for pid in paused:
                    os.kill(pid, signal.SIGSTOP)
            time.sleep(0.005)
        assert run_a is not None and _job_states(state, run_a) == ["RUNNING"]

        t_b = time.monotonic()
        b, b_dir = _start(tmp_path, "b", state)
        started.append(b)
        # B's evaluator is up and its agent has submitted: B's start-up is over
        while not ((run_b := _run_id(b_dir)) and _job_states(state, run_b)):
            assert b.poll() is None and time.monotonic() < deadline, "B ended early"
            time.sleep(0.02)
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
        _, err_a = _finish(a)
        a_s = time.monotonic() - t_a
        _, err_b = _finish(b)
        b_s = time.monotonic() - t_b
    finally:
        for pid in paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        for proc in started:  # a failed check must not leave a run behind
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    _check_run(a_dir, err_a)
    _check_run(b_dir, err_b)
    bound = 3 * alone_s + 10
    assert a_s < bound and b_s < bound, (alone_s, a_s, b_s)
