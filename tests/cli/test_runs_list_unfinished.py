"""``runs list`` shows the runs with no result.json: running, or lost with their harness.

A real ``ale-robotics run`` (its agent sleeping) is listed as running; SIGKILLed with its
whole process group (agent and embedded evaluator too), it is listed as lost, in the
table (LOST, and what to do) and in ``--json``, with ``--task`` too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
ENV = {**os.environ, "ALE_VIDEOS": "0", "COLUMNS": "80"}


def _list(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "runs", "list", str(root), *extra],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


@pytest.mark.slow  # a real run and five listings: about 35 s on 2 cores
def test_a_run_killed_with_its_harness_is_listed_as_lost(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_dir = root / "r1"
    harness = subprocess.Popen(
        [
            *CLI,
            "run",
            TASK_ID,
            "--agent",
            f"{sys.executable} -c 'import time; time.sleep(300)'",
            "--sandbox",
            "none",
            "--run-dir",
            str(run_dir),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "trajectory.jsonl").exists():
            assert harness.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        listed = _list(root, "--json")
        assert listed.returncode == 0, listed.stderr
        doc = json.loads(listed.stdout)
        assert doc["runs"] == []
        [running] = doc["unfinished"]
        assert running["state"] == "running"
        assert running["task_id"] == TASK_ID
        assert running["run_dir"] == str(run_dir)
        assert "LOST" not in _list(root).stdout
    finally:
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait(timeout=30)
    assert not (run_dir / "result.json").exists()
    doc = json.loads(_list(root, "--json").stdout)
    [lost] = doc["unfinished"]
    assert lost["state"] == "lost"
    assert lost["run_id"] == running["run_id"]
    table = _list(root)
    assert table.returncode == 0
    assert "LOST" in table.stdout and running["run_id"] in table.stdout
    assert "run the task again" in table.stderr + table.stdout
    assert all(len(line) <= 80 for line in table.stdout.splitlines())
    by_task = _list(root, "--task", TASK_ID, "--json")
    assert [u["run_id"] for u in json.loads(by_task.stdout)["unfinished"]] == [lost["run_id"]]
