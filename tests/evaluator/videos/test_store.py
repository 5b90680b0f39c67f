"""What the evaluator keeps for videos: the action tape, the kept sources and their removal."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from ale_robotics.evaluator.videos import ActionTape, VideoStore
from ale_robotics.evaluator.videos.store import KEEP_S
from ale_robotics.evaluator.videos.tape import tape_key


def test_the_tape_keeps_the_first_episodes_actions_as_the_envs_got_them() -> None:
    tape = ActionTape(2)
    episode_of_env = [0, 1, 2]
    step = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], dtype=np.float64)
    tape.record(episode_of_env, [0, 1, 2], step)
    step[:] = 9.0  # a caller's buffer reused: the tape copied its rows
    episode_of_env[0] = 3  # env 0 moved on to episode 3, past the tape
    tape.record(episode_of_env, [0, 1], np.array([[1.0, 1.0], [2.0, 2.0]]))
    arrays = tape.arrays()
    assert sorted(arrays) == [tape_key(0), tape_key(1)]
    np.testing.assert_array_equal(arrays[tape_key(0)], [[0.1, 0.2]])
    np.testing.assert_array_equal(arrays[tape_key(1)], [[0.3, 0.4], [2.0, 2.0]])
    assert arrays[tape_key(1)].dtype == np.float64  # float64 actions stay float64


def test_the_store_keeps_links_and_tapes_only_when_it_makes_videos(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "policy.safetensors").write_bytes(b"weights")
    tape = ActionTape(1)
    tape.record([0], [0], np.zeros((1, 2), np.float32))

    off = VideoStore(tmp_path / "off", 0)
    off.keep_submission("run-a", "job-1", snapshot)
    off.keep_tape("run-a", "job-2", tape)
    assert not (tmp_path / "off").exists()

    on = VideoStore(tmp_path / "on", 3)
    on.keep_submission("run-a", "job-1", snapshot)
    on.keep_tape("run-a", "job-2", tape)
    kept = on.submission_dir("run-a", "job-1") / "policy.safetensors"
    assert kept.read_bytes() == b"weights"
    assert os.stat(kept).st_ino == os.stat(snapshot / "policy.safetensors").st_ino  # a link
    (snapshot / "policy.safetensors").unlink()  # the runner deletes its snapshot
    assert kept.read_bytes() == b"weights"
    with np.load(on.session_file("run-a", "job-2")) as arrays:
        assert arrays.files == [tape_key(0)]
    on.remove_run("run-a")
    assert not (tmp_path / "on" / "run-a").exists()


def test_reclaim_removes_only_runs_untouched_for_a_day(tmp_path: Path) -> None:
    store = VideoStore(tmp_path / "videos", 3)
    for run in ("run-old", "run-new"):
        (store.job_dir(run, "job-1")).mkdir(parents=True)
    old = time.time() - KEEP_S - 60
    for path in (store.root / "run-old", store.job_dir("run-old", "job-1")):
        os.utime(path, (old, old))
    assert store.reclaim() == ["run-old"]
    assert [p.name for p in store.root.iterdir()] == ["run-new"]


def test_a_negative_video_count_is_refused(tmp_path: Path) -> None:
    from ale_robotics.evaluator import EvaluatorConfig

    with pytest.raises(ValueError, match="video_episodes must be >= 0"):
        EvaluatorConfig(tmp_path, None, video_episodes=-1)
