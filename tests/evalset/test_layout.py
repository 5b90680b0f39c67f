"""What a slot's directory holds, and clearing one for a redo (no runs needed: a
completed run's report comes from the end-to-end tests)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ale_robotics.evalset import EvalSetSpec, inspect_slot, plan_slots
from ale_robotics.evalset.layout import RunSlot, clear_run_dir
from ale_robotics.harness.report import StoppedRunReport

SPEC = EvalSetSpec.model_validate(
    {
        "schema_version": 1,
        "tasks": ["td3-inverted-pendulum-v1"],
        "agents": [{"label": "a", "cmd": "python a.py"}],
        "repetitions": 1,
    }
)


def slot(tmp_path: Path) -> RunSlot:
    return plan_slots(SPEC, tmp_path, "s")[0]


def test_new_and_empty_dirs_are_new(tmp_path: Path) -> None:
    s = slot(tmp_path)
    assert inspect_slot(s, SPEC).state == "new"
    s.run_dir.mkdir(parents=True)
    assert inspect_slot(s, SPEC).state == "new"


def test_partial_unreadable_and_stopped_runs_are_redone(tmp_path: Path) -> None:
    s = slot(tmp_path)
    s.run_dir.mkdir(parents=True)
    (s.run_dir / "agent.log").write_text("killed before it ended\n")
    status = inspect_slot(s, SPEC)
    assert (status.state, status.reason) == ("redo", "no result.json (the run never finished)")
    (s.run_dir / "result.json").write_text("{not json")
    assert inspect_slot(s, SPEC).reason == "result.json unreadable (JSONDecodeError)"
    for state in ("interrupted", "failed"):
        report = StoppedRunReport(
            state=state, run_id="run-x", task_id=s.task_id, agent_cmd=s.cmd,
            reason="stopped", phase="agent", wall_s=1.0,
        )  # fmt: skip
        (s.run_dir / "result.json").write_text(report.model_dump_json())
        status = inspect_slot(s, SPEC)
        assert (status.state, status.reason) == ("redo", state)


def test_clearing_removes_read_only_leftovers(tmp_path: Path) -> None:
    s = slot(tmp_path)
    locked = s.run_dir / "scratch" / "locked"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    os.chmod(locked, stat.S_IRUSR | stat.S_IXUSR)
    clear_run_dir(s.run_dir)
    assert not s.run_dir.exists()
    clear_run_dir(s.run_dir)  # nothing there: nothing to do
