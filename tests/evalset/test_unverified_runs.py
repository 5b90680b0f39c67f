"""An eval set leaves out a run whose result.json disagrees with its signed events
(issue 26, item 6), and says so.

The set is laid out from real runs (``tests/runs/runs_helpers``: the shipped TD3
checkpoint twice, its zeroed copy once) in the directories ``eval-set`` keeps them in;
the zeroed agent's second repetition is a copy of its first whose result.json (and
submission) were rewritten to claim the cap, 1.5, its signed trajectory untouched.
``ale-robotics eval-set`` finds every run done, runs nothing and aggregates.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runs"))

from runs_helpers import AGENT, CLI, TASK_ID, forge, runs_root

ROOT = Path(__file__).resolve().parents[2]


def test_an_unverified_run_is_left_out_of_the_aggregate_and_named(tmp_path: Path) -> None:
    made = runs_root()
    agent = f"{sys.executable} {AGENT}"
    zeroed = made.base / "zeroed.safetensors"
    spec = tmp_path / "study.json"
    spec.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "tasks": [TASK_ID],
                "agents": [
                    {"label": "alpha", "cmd": agent},
                    {"label": "beta", "cmd": f"{agent} --checkpoint {zeroed}"},
                ],
                "repetitions": 2,
                "sandbox": "none",
                "bootstrap": {"reps": 300, "profile_reps": 200, "seed": 3},
            }
        )
    )
    root = tmp_path / "runs"
    cells = root / "study" / TASK_ID
    for src, dest in (
        ("alpha-1", "alpha/rep0"),
        ("alpha-2", "alpha/rep1"),
        ("beta-1", "beta/rep0"),
        ("beta-1", "beta/rep1"),
    ):
        shutil.copytree(made.root / src, cells / dest)
    forge(cells / "beta" / "rep1", made.root / "alpha-1", 1.5 * 982.02)

    proc = subprocess.run(
        [*CLI, "eval-set", str(spec), "--runs-root", str(root), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "4 run(s) were already completed: skipped" in proc.stderr
    agg = json.loads(proc.stdout)["aggregate"]
    beta = next(c for c in agg["cells"] if c["label"] == "beta")
    assert (beta["n"], beta["reps"], beta["unverified_reps"]) == (1, [0], [1])
    assert max(beta["scores"]) < 0.1  # the claimed 1.5 moves nothing
    assert agg["runs_scored"] == 3
    (note,) = [n for n in agg["notes"] if "UNVERIFIED" in n]
    assert f"{TASK_ID}/beta/rep1" in note
    written = root / "study" / "aggregate"
    assert json.loads((written / "aggregate.json").read_text()) == agg
    assert f"{TASK_ID}/beta/rep1" in (written / "aggregate.md").read_text()
    alpha = next(c for c in agg["cells"] if c["label"] == "alpha")
    assert alpha["n"] == 2 and alpha["unverified_reps"] == []
    assert alpha["scores"] == [pytest.approx(1000.0 / 982.02)] * 2

    # each run says which set and repetition it is, and the forged one that it is unverified
    for rep in (0, 1):
        show = subprocess.run(
            [*CLI, "runs", "show", str(cells / "beta" / f"rep{rep}"), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        doc = json.loads(show.stdout)
        assert doc["eval_set"] == {"name": "study", "repetition": rep}
        assert doc["run"]["verified"] is (rep == 0)
