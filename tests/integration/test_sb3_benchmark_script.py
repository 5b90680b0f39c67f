"""benchmarks/sb3_vecenv.py runs end to end (tiny settings) and reports both figures.

The README quotes its output (one batched session against N sessions under SB3), so
the script must keep working; the figures themselves are not asserted (a shared CI
machine's speed says nothing), only that every one is measured and printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sb3_benchmark_prints_both_ratios_and_a_json_line() -> None:
    """Alternating rounds of the three configurations; medians and per-round ratios."""
    args = ["--num-envs", "2", "--rounds", "2", "--learn-steps", "512", "--step-seconds", "0.1"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sb3_vecenv.py"), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert sum("batched / N sessions:" in line for line in lines) == 2
    out = json.loads(lines[-1])
    for what in ("learn", "step"):
        for name in ("batched", "sessions", "local"):
            assert out[f"{what}_{name}_steps_per_s"] > 0
            assert len(out["rounds"][what][name]) == 2
        assert out[f"{what}_ratio"] > 0
    assert out["num_envs"] == 2
