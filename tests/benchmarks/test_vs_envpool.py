"""``benchmarks/vs_envpool.py`` runs both sides and prints what its doc promises.

A smoke run (``--quick``: one round of 0.2 s slices) of one batch and one interactive
workload: it checks the output's shape and that both sides really stepped the same env,
never their speed. EnvPool is not a project dependency: it lives in ``.venv-peers``, made by
``make bench-peers``, which CI does not run, so without it this test is skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".venv-peers/bin/python"


def _envpool_installed() -> bool:
    if not PEERS.exists():
        return False
    probe = subprocess.run([str(PEERS), "-c", "import envpool"], capture_output=True, check=False)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _envpool_installed(), reason="EnvPool is not installed in .venv-peers: run make bench-peers"
)


def test_vs_envpool_quick_json_has_every_column_and_both_sides_stepped() -> None:
    proc = subprocess.run(
        [
            *(sys.executable, str(ROOT / "benchmarks/vs_envpool.py"), "--quick", "--json"),
            *("--only", "pendulum-random", "--only", "hopper"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = {r["workload"]: r for r in data["rows"]}
    assert set(rows) == {"pendulum-random", "hopper"}
    assert rows["pendulum-random"]["mode"] == "batch"
    assert rows["hopper"]["mode"] == "interactive" and rows["hopper"]["gymnasium"] > 0
    for name, r in rows.items():
        assert r["ours"] > 0 and r["envpool"] > 0, name
        assert r["ratio_min"] <= r["ratio"] <= r["ratio_max"]
        assert r["ratio"] == pytest.approx(r["ours"] / r["envpool"])  # one round
        for side in ("ours", "envpool"):
            cpu = r["cpu_us_per_step"][side]
            assert cpu > 0 and r["physics_us_per_step"][side] > 0, (name, side)
            parts = r["physics_us_per_step"][side] + r["policy_us_per_step"][side]
            assert r["overhead_us_per_step"][side] == pytest.approx(cpu - parts)
        v = r["versions"]
        assert v["ours"]["env"] == v["envpool"]["env"]  # the same Gymnasium version, v5
        assert v["ours"]["mujoco"].startswith("3.3") and v["envpool"]["mujoco"].startswith("3.6")
    # random weights topple the pendulum within ~10 steps on both sides: the same env
    assert 3 < rows["pendulum-random"]["episode_length"] < 30
    seen = rows["pendulum-random"]["steps_per_ended_episode"]
    assert 3 < seen["ours"] < 30 and 3 < seen["envpool"] < 30
    assert rows["pendulum-random"]["policy_us_per_step"]["envpool"] > 0
    # the interactive row's ceiling: a bare echo of our Step's bytes around our physics
    hopper = rows["hopper"]
    assert "ceiling" not in rows["pendulum-random"]
    assert hopper["ceiling"] > 0 and hopper["ceiling_work_us"] > 0
    assert hopper["ceiling_ratio"] == pytest.approx(hopper["ceiling"] / hopper["envpool"])
    assert hopper["ceiling_bytes"]["response"] > 64 * 11 * 8  # 64 float64 observations
    assert 0 < hopper["ceiling_bytes"]["request"] < hopper["ceiling_bytes"]["response"]
    assert hopper["ceiling_overhead_us_per_step"] > 0
    # the same session through the shared-memory data plane, alternated in the same rounds
    assert "ours_shm" not in rows["pendulum-random"]
    assert hopper["ours_shm"] > 0
    assert hopper["ratio_shm"] == pytest.approx(hopper["ours_shm"] / hopper["envpool"])
    assert hopper["shm_vs_grpc"] == pytest.approx(hopper["ours_shm"] / hopper["ours"])
    assert hopper["overhead_us_per_step_shm"] == pytest.approx(
        hopper["cpu_us_per_step_shm"] - hopper["physics_us_per_step"]["ours"]
    )
    for line in (
        "workload",
        "ovh/episode",
        "MuJoCo 3.3",
        "Ceiling of the interactive rows",
        "through the shared-memory data plane",
    ):
        assert line in proc.stdout
    assert all(len(line) <= 80 for line in proc.stdout.splitlines()[:-1])  # not the JSON
