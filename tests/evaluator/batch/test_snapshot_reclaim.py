"""Snapshots live as long as their job needs them, not forever.

A terminal job's ``STATE_DIR/snapshots/<job>/`` is deleted when it ends; at
start the evaluator deletes ``staging-*`` dirs and snapshots of terminal or
unknown jobs left by a dead process, and keeps those of queued and running jobs,
which a restart re-runs from them (tests/hardening/test_crash_recovery.py).

Other evaluators may share the snapshots dir (replicas on one volume): a
``staging-*`` dir or an unknown job's dir younger than the reclaim age may be a
submission one of them is copying, or one renamed into place whose job is being
created, so it is kept; only old ones are reclaimed
(:func:`~ale_robotics.evaluator.batch.snapshot.reclaim_snapshots`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import random_weights
from pg import pg_cluster
from safetensors.numpy import save_file
from stores import Backend, backend

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.batch.snapshot import (
    RECLAIM_MIN_AGE_S,
    STAGING_PREFIX,
    reclaim_snapshots,
    staging_dir,
)
from ale_robotics.evaluator.store import SqliteJobStore, new_job_id
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.tasks import Registry, TaskSpec

__all__ = ["backend", "pg_cluster"]

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
    # what a dead process can leave behind, long ago
    (snapshots / "staging-0123").mkdir()
    (snapshots / "staging-0123" / "policy.safetensors").write_bytes(b"half a copy")
    (snapshots / "job-unknown").mkdir()
    for stale in ("staging-0123/policy.safetensors", "staging-0123", "job-unknown"):
        _age(snapshots / stale, RECLAIM_MIN_AGE_S + 60)
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
        # and that one is gone too now (deleted just after the terminal state is stored)
        while list(snapshots.iterdir()):
            assert time.monotonic() < deadline, "the finished job's snapshot was kept"
            time.sleep(0.01)
    finally:
        second.stop()


def _age(path: Path, seconds: float) -> None:
    """Make ``path`` look last modified ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def _staged(snapshots: Path, age_s: float | None = None, name: str | None = None) -> Path:
    """A snapshot dir with one file, as a copy leaves it; aged ``age_s`` (dir and file)."""
    path = snapshots / name if name is not None else staging_dir(snapshots)
    path.mkdir()
    (path / "policy.safetensors").write_bytes(b"weights")
    if age_s is not None:
        _age(path / "policy.safetensors", age_s)
        _age(path, age_s)
    return path


def test_only_old_staging_and_unknown_dirs_are_reclaimed(tmp_path: Path, backend: Backend) -> None:
    """Replica B reclaims at start while replica A is copying a submission (fresh
    ``staging-*``) and has just renamed another into place (fresh ``job-*``, its job
    not created yet): both stay. What a dead process left an hour ago goes."""
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    store = backend.open()
    old = RECLAIM_MIN_AGE_S + 60
    live_copy = _staged(snapshots)
    dead_copy = _staged(snapshots, old)
    renamed = _staged(snapshots, name=new_job_id())  # A creates its job next
    orphan = _staged(snapshots, old, name=new_job_id())  # its job never came
    queued_id = new_job_id()
    queued = _staged(snapshots, old, name=queued_id)
    store.create(
        run_id="r1", task_id="t", client_token="q", episodes_total=1, files={}, job_id=queued_id
    )
    running_id = new_job_id()
    running = _staged(snapshots, old, name=running_id)
    store.create(
        run_id="r1", task_id="t", client_token="r", episodes_total=1, files={}, job_id=running_id
    )
    assert store.claim_next() is not None and store.claim_next() is not None
    done_id = new_job_id()
    done = _staged(snapshots, name=done_id)  # fresh, but its job is over
    store.create(
        run_id="r1", task_id="t", client_token="d", episodes_total=1, files={}, job_id=done_id
    )
    store.finish(done_id, JobState.CANCELLED)
    (snapshots / "stray-file").write_bytes(b"x")  # not a dir: never touched
    _age(snapshots / "stray-file", old)

    removed = reclaim_snapshots(snapshots, store)
    assert removed == sorted([dead_copy.name, orphan.name, done.name])
    left = sorted(p.name for p in snapshots.iterdir())
    assert left == sorted([live_copy.name, renamed.name, queued.name, running.name, "stray-file"])
    assert (live_copy / "policy.safetensors").read_bytes() == b"weights"


def test_a_long_copy_is_young_while_its_file_is_being_written(
    tmp_path: Path, backend: Backend
) -> None:
    """The dir's own mtime changes only when a file is created in it; a big file
    written for long keeps the copy young through its own mtime."""
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    copying = _staged(snapshots, RECLAIM_MIN_AGE_S + 60)
    (copying / "policy.safetensors").write_bytes(b"more weights")  # being written now
    assert reclaim_snapshots(snapshots, backend.open()) == []
    assert copying.is_dir()


def test_the_reclaim_age_is_a_parameter(tmp_path: Path, backend: Backend) -> None:
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    store = backend.open()
    ten_minutes = _staged(snapshots, 600)
    assert reclaim_snapshots(snapshots, store) == []  # the default: an hour
    assert reclaim_snapshots(snapshots, store, min_age_s=300) == [ten_minutes.name]
    fresh = _staged(snapshots)
    assert reclaim_snapshots(snapshots, store, now=time.time() + 2 * RECLAIM_MIN_AGE_S) == [
        fresh.name
    ]
    with pytest.raises(ValueError, match="min_age_s"):
        reclaim_snapshots(snapshots, store, min_age_s=-1)
    assert reclaim_snapshots(tmp_path / "missing", store) == []


def test_symlinks_are_never_followed(tmp_path: Path, backend: Backend) -> None:
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"x")
    link = snapshots / f"{STAGING_PREFIX}link"
    link.symlink_to(outside)
    _age(link, RECLAIM_MIN_AGE_S + 60)
    assert reclaim_snapshots(snapshots, backend.open(), min_age_s=0) == []
    assert (outside / "keep").exists() and link.is_symlink()
