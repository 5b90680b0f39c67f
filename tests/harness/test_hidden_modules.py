"""Modules a task hides from its agent: located without importing, unimportable in the sandbox."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ale_robotics.harness.agent.hidden_modules import module_path, sandbox_hidden_paths
from ale_robotics.sandboxes.bwrap.command import bwrap_command, sandbox_available
from ale_robotics.tasks import TaskSpec, default_registry

REG = default_registry()
MW_TASK = "tdmpc2-mw-push-v2"
MW_TASKS = ("tdmpc2-mw-push-v1", MW_TASK)
needs_bwrap = pytest.mark.skipif(
    not sandbox_available(), reason="bubblewrap is missing or cannot start a sandbox here"
)

PROBE = """
import os
try:
    import metaworld.policies
    print("policies: imported")
except ImportError as exc:
    print("policies: ImportError:", exc)
import metaworld
print("metaworld: imported")
print("listing:", sorted(os.listdir(os.path.join(os.path.dirname(metaworld.__file__), "policies"))))
"""


def test_module_paths_are_found_without_importing() -> None:
    before = set(sys.modules)
    policies = module_path("metaworld.policies")
    assert policies is not None and (policies / "sawyer_push_v3_policy.py").is_file()
    assert module_path("metaworld.policies.policy") == policies / "policy.py"
    assert module_path("metaworld.no_such_thing") is None
    assert module_path("no_such_package_at_all") is None
    assert not {m for m in set(sys.modules) - before if m.startswith("metaworld")}


def _agent_side(task_id: str) -> TaskSpec:
    """The task as if its agent simulated itself (no training section): only its
    env.agent_hidden_modules are hidden, which is what these tests are about."""
    return REG.get(task_id).model_copy(update={"training": None})


def test_only_the_metaworld_tasks_hide_modules_of_their_own() -> None:
    """env.agent_hidden_modules: only Meta-World's scripted policies. (Tasks whose simulator
    runs only in the evaluator hide the whole simulator too: tests/hardening/
    test_simulator_hidden.py.)"""
    for entry in REG:
        paths = sandbox_hidden_paths(entry.spec.model_copy(update={"training": None}))
        if entry.spec.id in MW_TASKS:
            assert paths == [module_path("metaworld.policies").resolve()]  # type: ignore[union-attr]
        else:
            assert paths == [], entry.spec.id
        if not entry.spec.simulator_in_evaluator:
            assert sandbox_hidden_paths(entry.spec) == paths, entry.spec.id


@needs_bwrap
def test_hidden_package_cannot_be_imported_or_read_in_the_sandbox(short_tmp: Path) -> None:
    for d in ("ws", "scratch", "sub", "sock"):
        (short_tmp / d).mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(short_tmp / "sock" / "a.sock"))
    try:
        argv = bwrap_command(
            [sys.executable, "-c", PROBE],
            workspace=short_tmp / "ws",
            scratch_dir=short_tmp / "scratch",
            submission_dir=short_tmp / "sub",
            agent_socket=short_tmp / "sock" / "a.sock",
            block_imports=sandbox_hidden_paths(_agent_side(MW_TASK)),
        )
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        sock.close()
    assert out.returncode == 0, out.stderr
    assert "policies: ImportError: metaworld.policies is hidden from agents" in out.stdout
    assert "metaworld: imported" in out.stdout
    assert "listing: ['__init__.py']" in out.stdout


RUN_PROBE = """
for name in ("metaworld.policies", "metaworld", "mujoco"):
    try:
        __import__(name)
        print(name + ": imported")
    except ImportError as exc:
        print(name + ": ImportError:", exc)
"""


@needs_bwrap
def test_agent_of_the_metaworld_task_cannot_import_the_scripted_policies(short_tmp: Path) -> None:
    """Through `ale-robotics run`: the harness passes the task's hidden modules to bwrap,
    and, as its simulator runs only in the evaluator, Meta-World and MuJoCo whole."""
    (short_tmp / "agent.py").write_text(RUN_PROBE)
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "ale_robotics", "run", MW_TASK),
            *("--agent", f"{sys.executable} agent.py", "--sandbox", "bwrap"),
            *("--workspace", str(short_tmp), "--run-dir", str(short_tmp / "run")),
            *("--state-dir", str(short_tmp / "state")),  # hidden: inside the workspace
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (short_tmp / "run" / "agent.log").read_text()
    for name in ("metaworld.policies", "metaworld", "mujoco"):
        assert f"{name}: ImportError: " in log, log
    assert "metaworld: ImportError: metaworld is hidden from agents" in log, log
    assert "mujoco: ImportError: mujoco is hidden from agents" in log, log
    assert json.loads((short_tmp / "run" / "result.json").read_text())["sandbox"] == "bwrap"
