"""Reading run reports must not load the evaluator, gRPC servers or the agent sandbox."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_run_index_loads_no_evaluator_core_or_harness_run() -> None:
    code = (
        "import sys, ale_robotics.runs\n"
        "heavy = [m for m in ('ale_robotics.evaluator.core', "
        "'ale_robotics.evaluator.server.listeners', 'ale_robotics.harness.run') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"importing ale_robotics.runs loaded {out}"
