"""``ale-robotics evaluator serve``: operator input that cannot work is refused before it
starts, in one line, with exit 2, and nothing made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("what", ["missing", "a file"])
def test_a_submission_dir_that_is_not_a_directory_is_refused_before_anything_starts(
    short_tmp: Path, what: str
) -> None:
    volume = short_tmp / "volume"
    if what == "a file":
        volume.write_text("x")
    state = short_tmp / "state"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "evaluator",
            "serve",
            "--state-dir",
            str(state),
            "--submission-dir",
            str(volume),
            "--agent-listen",
            f"unix://{short_tmp}/a.sock",
            "--harness-listen",
            f"unix://{short_tmp}/h.sock",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    said = "does not exist" if what == "missing" else "is not a directory"
    assert lines == [
        f"error: --submission-dir {volume} {said}: give the directory the agents' submissions "
        "are written to (mount the shared volume first), or leave it out for "
        "STATE_DIR/submissions"
    ]
    assert not state.exists()  # nothing made
    assert not (short_tmp / "a.sock").exists()
