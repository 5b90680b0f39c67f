"""``benchmarks/batch_eval.py --executor ray``: its comparison table and JSON (tiny sizes:
the plumbing and the output contract, never the speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "batch_eval.py"
ARGS = ("--executor", "ray", "--episodes", "4", "--reps", "2", "--json")


@pytest.mark.slow  # the benchmark script on Ray and locally: about 40 s on two cores
def test_batch_eval_compares_ray_with_local_in_the_same_run() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *ARGS],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])["executors"]
    assert doc["identical"] is True and doc["reps"] == 2 and doc["envs_per_shard"] == 2
    for n in ("1", "2"):
        row = doc["by_workers"][n]
        for kind in ("local", "ray"):
            cell = row[kind]
            assert cell["min_steps_per_s"] <= cell["median_steps_per_s"] <= cell["max_steps_per_s"]
        assert row["ray_vs_local"] == pytest.approx(
            row["ray"]["median_steps_per_s"] / row["local"]["median_steps_per_s"]
        )
        assert len(row["ray_vs_local_per_rep"]) == 2
    assert set(doc["scaling_1_to_2"]) == {"local", "ray"}
    for line in ("ray/local", "scaling 1 -> 2 workers", "outcomes identical local vs ray: yes"):
        assert line in proc.stdout
