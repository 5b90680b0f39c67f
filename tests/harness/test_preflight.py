"""The agent command as the harness will start it (unit level, no run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import RunOptions
from ale_robotics.harness.preflight import (
    Operand,
    check_agent_command,
    script_operand,
    workspace_argv,
)


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


# --- The agent command checked before anything starts (issue 34) ----------------------


def _refusal(cmd: str, workspace: Path, sandbox: str = "none") -> str:
    """The one-line refusal of ``--agent cmd`` (fails the test if it is accepted)."""
    opts = RunOptions(task_id="td3-inverted-pendulum-v2", agent_cmd=cmd, sandbox=sandbox)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError) as caught:
        check_agent_command(opts, workspace)
    return caught.value.message


def _accepted(cmd: str, workspace: Path, sandbox: str = "none") -> None:
    opts = RunOptions(task_id="td3-inverted-pendulum-v2", agent_cmd=cmd, sandbox=sandbox)  # type: ignore[arg-type]
    check_agent_command(opts, workspace)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "examples" / "agents").mkdir(parents=True)
    for name in ("td3_train.py", "submit_checkpoint.py"):
        (ws / "examples" / "agents" / name).write_text("print('hi')\n")
    (ws / "run.sh").write_text("echo hi\n")
    (ws / "agent.js").write_text("console.log('hi')\n")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "__main__.py").write_text("")
    return ws


@pytest.mark.parametrize("interpreter", ["python", "python3", sys.executable, "node", "bash", "sh"])
@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_a_missing_script_is_refused_with_the_path_tried_in_the_workspace(
    workspace: Path, interpreter: str, sandbox: str
) -> None:
    """Today Python started in the scratch directory, failed there, and the run scored
    0 with exit 0; now: refused, naming the workspace path that was tried."""
    message = _refusal(f"{interpreter} nosuchfile.py", workspace, sandbox)
    assert "the script nosuchfile.py does not exist" in message
    assert f"tried {workspace / 'nosuchfile.py'}" in message
    assert "relative paths in --agent start at the workspace" in message
    assert "scratch" in message and "did you mean" not in message  # nothing is close


@pytest.mark.parametrize(
    ("cmd", "closest"),
    [
        ("python examples/agent/td3_train.py", "examples/agents/td3_train.py"),
        ("python -u examples/agents/td3_trian.py --seed 1", "examples/agents/td3_train.py"),
        ("python3 -W ignore -X dev submit_checkpoint.py", "examples/agents/submit_checkpoint.py"),
        ("bash -e -o pipefail rnu.sh", "run.sh"),
        ("node --require ./x agnet.js", "agent.js"),
    ],
)
def test_the_refusal_names_the_closest_existing_file(
    workspace: Path, cmd: str, closest: str
) -> None:
    message = _refusal(cmd, workspace)
    assert message.endswith(f"did you mean {closest}?"), message


@pytest.mark.parametrize(
    "cmd",
    [
        "python examples/agents/td3_train.py --seed 1",
        "python -u examples/agents/td3_train.py",
        "python -B -W ignore::DeprecationWarning examples/agents/td3_train.py",
        "python -c 'import sys; print(sys.argv)' nosuchfile.py",
        "python -m json.tool nosuchfile.json",
        "python -mjson.tool",
        "python pkg",  # a directory with __main__.py
        "python -",  # the script on stdin
        "bash -c 'python nosuchfile.py'",  # nothing to check: a string of commands
        "bash -ec 'exit 0'",
        "sh run.sh",
        "node agent",  # node tries agent.js
        "node -e 'console.log(1)'",
        "true nosuchfile.py",  # not an interpreter: its arguments are its own
    ],
)
def test_what_an_interpreter_does_not_read_as_a_script_is_not_checked(
    workspace: Path, cmd: str
) -> None:
    _accepted(cmd, workspace)


def test_python_m_of_a_module_this_python_cannot_find_is_a_warning_not_a_refusal(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _accepted("python -m nosuchmodule_xyz.train", workspace)
    err = capsys.readouterr().err
    assert "warning:" in err and "finds no module 'nosuchmodule_xyz'" in err


def test_a_program_path_missing_from_the_workspace_names_the_path_tried(
    workspace: Path,
) -> None:
    message = _refusal("./rnu.sh --fast", workspace)
    assert f"there is no file {workspace / 'rnu.sh'}" in message
    assert message.endswith("did you mean run.sh?"), message
    (workspace / "run.sh").chmod(0o644)
    message = _refusal("./run.sh", workspace)
    assert "is not executable" in message and "bash" in message


def test_a_mistyped_program_suggests_the_one_meant(workspace: Path) -> None:
    message = _refusal("pyhton examples/agents/td3_train.py", workspace)
    assert "command not found: 'pyhton'" in message and "did you mean 'python'?" in message


@pytest.mark.parametrize(
    ("argv", "operand"),
    [
        (["python", "a.py", "-x"], Operand("script", "a.py")),
        (["python3.11", "-u", "-O", "a.py"], Operand("script", "a.py")),
        (["python", "-uB", "a.py"], Operand("script", "a.py")),
        (["python", "-W", "ignore", "a.py"], Operand("script", "a.py")),
        (["python", "-Wignore", "a.py"], Operand("script", "a.py")),
        (["python", "-X", "dev", "--", "a.py"], Operand("script", "a.py")),
        (["python", "-m", "pkg.train", "a.py"], Operand("module", "pkg.train")),
        (["python", "-um", "pkg"], Operand("module", "pkg")),
        (["python", "-c", "code", "a.py"], Operand("code", "code")),
        (["python", "-"], Operand("stdin")),
        (["python"], Operand("stdin")),
        (["bash", "-e", "-o", "pipefail", "a.sh"], Operand("script", "a.sh")),
        (["bash", "--norc", "--rcfile", "rc", "a.sh"], Operand("script", "a.sh")),
        (["bash", "-lc", "echo"], Operand("code", "echo")),
        (["sh", "-s"], Operand("stdin")),
        (["node", "--inspect", "-r", "ts-node/register", "a.js"], Operand("script", "a.js")),
        (["node", "--max-old-space-size=4096", "a.js"], Operand("script", "a.js")),
        (["node", "-p", "1+1"], Operand("code", "1+1")),
    ],
)
def test_the_operand_an_interpreter_runs(argv: list[str], operand: Operand) -> None:
    assert script_operand(argv) == operand


def test_a_program_that_is_no_known_interpreter_has_no_operand() -> None:
    assert script_operand(["ruby", "a.rb"]) is None
    assert script_operand(["./agent", "a.py"]) is None
