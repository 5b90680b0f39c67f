"""benchmarks/ros_graph.py runs end to end and prints its rows (one short episode: plumbing
only, never its speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "ros_graph.py"

pytestmark = pytest.mark.ros


def test_a_row_per_episode_and_a_json_last_line() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--episodes", "1", "--steps", "30"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    [row] = doc["rows"]
    assert row["return_matches_schedule"] is True
    assert 0 < row["steps"] <= 30 and row["start_s"] > 0 and row["teardown_s"] > 0
    assert row["episode_s"] > row["start_s"]
    assert row["held"] >= row["missing"] >= 0
    assert doc["versions"]["mujoco"] == "3.3.0" and "python3-rospy" in doc["versions"]
    assert "episode 0: " in done.stdout and "load:" in done.stdout
