"""The run's task packet in the agent's sandbox (issue 29, point 1).

A real ``ale-robotics run`` in bubblewrap: the agent finds ``$ALE_TASK_DIR`` with the
task's brief, cannot write it, and lists the papers the operator attached with
``ale-robotics tasks attach-paper``; the packet is gone from the run directory once the
agent ended. (Every installed sandbox's part: tests/sandboxes/test_contract.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ale_robotics.sandboxes.bwrap.command import sandbox_available

ROOT = Path(__file__).resolve().parents[2]
TASK = "td3-inverted-pendulum-v2"

TASK_PROBE = r"""
import json, os
d = os.environ["ALE_TASK_DIR"]
brief = open(os.path.join(d, "brief.md"), encoding="utf-8").read()
try:
    with open(os.path.join(d, "brief.md"), "a") as fh:
        fh.write("changed by the agent")
    writable = True
except OSError:
    writable = False
try:
    open(os.path.join(d, "new.txt"), "w").close()
    creatable = True
except OSError:
    creatable = False
print("PROBE " + json.dumps({
    "task_dir": d, "brief_head": brief[:200], "writable": writable, "creatable": creatable,
    "papers": sorted(os.listdir(os.path.join(d, "paper"))),
    "task_json": json.load(open(os.path.join(d, "task.json")))["id"],
}), flush=True)
"""


@pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")
def test_a_sandboxed_agent_reads_its_packet_and_the_attached_paper(short_tmp: Path) -> None:
    state = short_tmp / "state"
    paper = short_tmp / "fujimoto2018.md"
    paper.write_text("# Addressing Function Approximation Error in Actor-Critic Methods\n")
    attach = subprocess.run(
        [sys.executable, "-m", "ale_robotics", "tasks", "attach-paper", TASK, str(paper),
         "--state-dir", str(state)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert attach.returncode == 0, attach.stdout + attach.stderr
    workspace = short_tmp / "ws"
    workspace.mkdir()
    (workspace / "agent.py").write_text(TASK_PROBE)
    run_dir = short_tmp / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ale_robotics", "run", TASK, "--agent", "python agent.py",
         "--sandbox", "bwrap", "--workspace", str(workspace), "--workers", "1",
         "--run-dir", str(run_dir), "--state-dir", str(state)],
        capture_output=True, text=True, check=False, cwd=ROOT, timeout=300,
    )  # fmt: skip
    log = (run_dir / "agent.log").read_text() if (run_dir / "agent.log").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + log[-3000:]
    lines = [ln for ln in log.splitlines() if ln.startswith("PROBE ")]
    assert lines, log
    seen = json.loads(lines[-1].removeprefix("PROBE "))
    assert seen["task_json"] == TASK
    assert TASK in str(seen["brief_head"]) or str(seen["brief_head"]).startswith("#")
    assert seen["writable"] is False and seen["creatable"] is False, seen
    assert seen["papers"] == ["fujimoto2018.md", "index.json"], seen
    assert not (run_dir / "task").exists()  # removed once the agent ended
    assert "changed by the agent" not in log
