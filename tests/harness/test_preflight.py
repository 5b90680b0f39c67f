"""The agent command as the harness will start it (unit level, no run)."""

from __future__ import annotations

import sys
from pathlib import Path

from ale_robotics.harness.preflight import workspace_argv


def test_a_bare_python_is_the_harness_interpreter(tmp_path: Path) -> None:
    # Run from a venv that is not activated, "python" on PATH is the system's,
    # which has no SDK: the agent would die on "import ale_robotics".
    (tmp_path / "agent.py").write_text("")
    for bare in ("python", "python3"):
        assert workspace_argv([bare, "agent.py", "-x"], tmp_path) == [
            sys.executable,
            str(tmp_path / "agent.py"),
            "-x",
        ]


def test_an_interpreter_given_by_path_or_as_an_argument_is_kept(tmp_path: Path) -> None:
    python = "/opt/py/bin/python"
    assert workspace_argv([python, "a.py"], tmp_path) == [python, "a.py"]
    assert workspace_argv(["env", "python", "a.py"], tmp_path) == ["env", "python", "a.py"]
