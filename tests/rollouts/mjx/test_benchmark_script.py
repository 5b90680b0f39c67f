"""benchmarks/mjx_gpu.py runs on a CPU-only host at small sizes and prints what it promises.

Its plumbing and output contract only (the table, the JSON line's keys, rates consistent
with each other), never its speed: on a CPU, MJX is a correctness path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "jax", reason="the 'mjx' extra is not installed (pip install -e '.[mjx]'; CI installs it)"
)

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "mjx_gpu.py"


@pytest.mark.slow
def test_small_sizes_print_a_table_and_a_json_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "4", "--horizon", "5", "--reps", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    data = json.loads(lines[-1])
    assert data["benchmark"] == "mjx_gpu" and data["horizon"] == 5
    assert data["device"].startswith("cpu") and data["jax_devices"]
    assert set(data["versions"]) == {"jax", "jaxlib", "mujoco", "mujoco-mjx"}
    assert [r["episodes"] for r in data["rows"]] == [4]
    for r in data["rows"]:
        assert r["mjx_steps_per_s"] > 0 and r["c_steps_per_s"] > 0 and r["mjx_compile_s"] >= 0
        assert r["mjx_over_c"] == pytest.approx(r["mjx_steps_per_s"] / r["c_steps_per_s"])
        # the same episodes on both kinds: returns close over 5 steps (float32 vs float64)
        assert r["mjx_mean_return"] == pytest.approx(r["c_mean_return"], abs=1e-2)
    out = proc.stdout
    assert "mjx: cpu" in out and "C kind:" in out and "episodes" in out
