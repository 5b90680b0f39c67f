"""`run --repetition N --agent-seed S`: the agent gets ALE_REPETITION and ALE_SEED, and
result.json records both (an eval set gives every run its own, issue 27)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = "import os; print('seed', os.environ.get('ALE_SEED'), os.environ.get('ALE_REPETITION'))"


@pytest.mark.parametrize("given", [True, False])
def test_the_agent_gets_its_seed_and_repetition_and_result_json_records_them(
    short_tmp: Path, given: bool
) -> None:
    agent = short_tmp / "agent.py"
    agent.write_text(AGENT)
    run_dir = short_tmp / "run"
    flags = ["--repetition", "2", "--agent-seed", "123456"] if given else []
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "ale_robotics", "run", "td3-inverted-pendulum-v2"),
            *("--agent", f"{sys.executable} {agent}", "--run-dir", str(run_dir)),
            *("--state-dir", str(short_tmp / "state"), *flags),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stderr
    log = (run_dir / "agent.log").read_text()
    report = json.loads((run_dir / "result.json").read_text())
    if given:
        assert "seed 123456 2" in log
        assert (report["agent_seed"], report["repetition"]) == (123456, 2)
    else:
        assert "seed None None" in log
        assert (report["agent_seed"], report["repetition"]) == (None, None)


def test_a_seed_out_of_range_is_refused_before_the_run(short_tmp: Path) -> None:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "ale_robotics", "run", "td3-inverted-pendulum-v2"),
            *("--agent", "true", "--agent-seed", str(2**31), "--run-dir", str(short_tmp / "r")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=short_tmp,
    )
    assert proc.returncode == 2 and "--agent-seed" in proc.stderr
    assert "Traceback" not in proc.stderr and not (short_tmp / "r").exists()
