"""benchmarks/engines_warp.py runs end to end and prints its rows (tiny sizes: plumbing only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import need_engine

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "engines_warp.py"


@pytest.mark.slow  # two child processes, one of them starting an engine worker
def test_rows_for_the_warp_and_c_kinds_and_a_json_last_line() -> None:
    need_engine("mujoco-warp")
    args = ["--sizes", "2", "--horizon", "3", "--reps", "1"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--kinds", "mujoco_warp,mujoco_rollout-1", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    rows = {(r["kind"], r["n"]): r for r in doc["rows"]}
    assert set(rows) == {("mujoco_warp", 2), ("mujoco_rollout-1", 2)}
    for row in rows.values():
        assert "skipped" not in row, row
        assert row["steps_per_s"] > 0 and row["peak_rss_mb"] > 0 and row["first_s"] > 0
    assert rows[("mujoco_warp", 2)]["device"] == "cpu"
    # the same policy and seeds: the kinds' returns agree (HalfCheetah, 3 steps)
    warp, c = rows[("mujoco_warp", 2)], rows[("mujoco_rollout-1", 2)]
    assert abs(warp["mean_return"] - c["mean_return"]) <= 1e-2 * max(1, abs(c["mean_return"]))
    assert "steps/s" in done.stdout and "load average" in done.stdout
