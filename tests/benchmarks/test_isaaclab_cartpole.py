"""benchmarks/isaaclab_cartpole.py: Isaac Lab's direct cartpole kit-less, offline, seeded.

Needs an Isaac Lab 3.0.0 interpreter (Python 3.12, ``pip install isaaclab==3.0.0``: 7.8 GB),
named by ``ALE_ISAACLAB_PYTHON``; without it the test is skipped saying so. It runs the
script twice with one seed and checks what the script promises: the env is built and stepped
with the shipped assets, nothing tried the network (the script records and refuses every
connection), and Isaac Lab's seeding makes the two runs' returns equal.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "isaaclab_cartpole.py"
PYTHON = os.environ.get("ALE_ISAACLAB_PYTHON")


@pytest.mark.slow  # two Isaac Lab envs built on the CPU (about a minute each here)
@pytest.mark.skipif(
    not PYTHON,
    reason="no Isaac Lab interpreter: set ALE_ISAACLAB_PYTHON to a Python 3.12 with "
    "isaaclab==3.0.0 (python3.12 -m venv V && V/bin/pip install isaaclab==3.0.0)",
)
def test_builds_offline_steps_and_seeds_exactly() -> None:
    assert PYTHON is not None
    rows = []
    for _ in range(2):
        done = subprocess.run(
            [PYTHON, str(SCRIPT), "--envs", "4", "--steps", "20", "--seed", "7", "--json"],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        (row,) = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
        assert row["network_tried"] == [] and row["env_steps_per_s"] > 0
        rows.append(row)
    assert rows[0]["returns"] == rows[1]["returns"]
