"""Snapshots live as long as their job needs them, not forever.

A terminal job's ``STATE_DIR/snapshots/<job>/`` is deleted when it ends; at
start the evaluator deletes ``staging-*`` dirs and snapshots of terminal or
unknown jobs left by a dead process, and keeps those of queued and running jobs,
which a restart re-runs from them (tests/hardening/test_crash_recovery.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.store import FailureSource, JobState, SqliteJobStore
from ale_robotics.tasks import Registry, TaskSpec

TASK_ID = "td3-inverted-pendulum-v1"
RUN = "run-snap-1"


def _config(tmp: Path) -> EvaluatorConfig:
    return EvaluatorConfig(
        tmp / "state",
        tmp / "vol",
        task_id=TASK_ID,
        run_id=RUN,
        workers=1,
        max_submissions_per_run=10,
    )


def test_terminal_snapshots_and_stale_staging_are_reclaimed(
    tmp_path: Path, registry: Registry, task: TaskSpec
) -> None:
    (tmp_path / "vol").mkdir()
    save_file(random_weights(task), str(tmp_path / "vol" / "policy.safetensors"))
    # an evaluator that dies before running its job: the job stays QUEUED
    first = Evaluator(_config(tmp_path), registry)
    queued, _ = first.submit("", "", "", "queued")
    first.stop()
    snapshots = tmp_path / "state" / "snapshots"
    assert (snapshots / queued.job_id / "policy.safetensors").is_file()
    # what a dead process can leave behind
    (snapshots / "staging-0123").mkdir()
    (snapshots / "staging-0123" / "policy.safetensors").write_bytes(b"half a copy")
    (snapshots / "job-unknown").mkdir()
    store = SqliteJobStore(tmp_path / "state" / "jobs.sqlite3")
    done, _ = store.create(
        run_id=RUN, task_id=TASK_ID, client_token="done", episodes_total=1, files={}
    )
    store.finish(done.job_id, JobState.FAILED, failure_source=FailureSource.SUBMISSION)
    store.close()
    (snapshots / done.job_id).mkdir()  # killed between finish and the deletion

    second = Evaluator(_config(tmp_path), registry)
    try:
        assert sorted(p.name for p in snapshots.iterdir()) == [queued.job_id]
        second.start()
        deadline = time.monotonic() + 60
        while not (job := second.store.get(queued.job_id)) or not job.terminal:
            assert time.monotonic() < deadline, "the queued job never finished"
            time.sleep(0.05)
        assert job.state is JobState.SUCCEEDED  # re-run from the kept snapshot
        assert list(snapshots.iterdir()) == []  # and that one is gone too now
    finally:
        second.stop()
