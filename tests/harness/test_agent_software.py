"""Agent software installed the usual ways (issue 45): ``--agent-tools DIR``, ``--agent-env
NAME=VALUE`` and a writable ``HOME`` of the agent's own, through real ``ale-robotics run``
processes in bubblewrap.

A tools directory laid out as an npm prefix (``bin/`` with a program) is on the agent's
PATH and read-only; the variables reach it and are recorded in ``result.json`` and the
trajectory; ``HOME`` is writable, not ``/tmp``, and inside the scratch directory (so its
bytes count against the disk quota). The harness's own and secret-looking names, and a
tools directory that would show the harness's state, are refused with one line, exit 2,
before anything is made.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import RunOptions
from ale_robotics.sandboxes.bwrap.command import sandbox_available

needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

CLI = [sys.executable, "-m", "ale_robotics"]
ROOT = Path(__file__).resolve().parents[2]
TASK = "td3-inverted-pendulum-v2"

AGENT = (
    "bash -c '"
    'echo "tool: $(agenttool)"; '
    'echo "home: $HOME"; '
    'echo remembered > "$HOME/.agentrc" && echo "home writable: $(cat $HOME/.agentrc)"; '
    'echo "flag: $AGENT_FLAG"; '
    'touch "$TOOLS/bin/planted" 2>/dev/null && echo "tools writable" || echo "tools read-only"'
    "'"
)


def _tools(tmp: Path) -> Path:
    """An npm-prefix-like directory: ``bin/agenttool``, a script."""
    tools = tmp / "npm-prefix"
    (tools / "bin").mkdir(parents=True)
    tool = tools / "bin" / "agenttool"
    tool.write_text("#!/bin/sh\necho from-the-tools-dir\n")
    tool.chmod(0o755)
    tools.chmod(0o755)
    tmp.chmod(0o755)
    return tools


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "run",
            TASK,
            "--workers",
            "1",
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--no-videos",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )


@needs_bwrap
def test_tools_env_and_home_reach_the_agent_and_are_recorded(short_tmp: Path) -> None:
    tools = _tools(short_tmp)
    proc = _run(
        short_tmp,
        "--sandbox",
        "bwrap",
        "--agent",
        AGENT.replace("$TOOLS", str(tools)),
        "--agent-tools",
        str(tools),
        "--agent-env",
        "AGENT_FLAG=on air",
    )
    run_dir = short_tmp / "run"
    log = (run_dir / "agent.log").read_text()
    assert "tool: from-the-tools-dir" in log, log + proc.stderr
    home = run_dir / "scratch" / "home"
    assert f"home: {home}" in log
    assert "home writable: remembered" in log
    assert (home / ".agentrc").read_text() == "remembered\n"
    assert "flag: on air" in log
    assert "tools read-only" in log and not (tools / "bin" / "planted").exists()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["agent_tools"] == [str(tools)]
    assert result["agent_env"] == {"AGENT_FLAG": "on air"}
    events = [json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    started = next(e["payload"] for e in events if e["kind"] == "run_started")
    assert started["agent_tools"] == [str(tools)]
    assert started["agent_env"] == {"AGENT_FLAG": "on air"}


_REFUSED = [
    ("agent_env", "ALE_TOKEN=x", "sets ALE_TOKEN itself"),
    ("agent_env", "OPENAI_BASE_URL=http://evil", "sets OPENAI_BASE_URL itself"),
    ("agent_env", "PATH=/tmp", "sets PATH itself"),
    ("agent_env", "LD_PRELOAD=/tmp/x.so", "sets LD_PRELOAD itself"),
    ("agent_env", "GH_TOKEN=ghp_x", "looks like a secret"),
    ("agent_env", "OPENAI_API_KEY=sk-x", "looks like a secret"),
    ("agent_env", "AWS_SECRET_ACCESS_KEY=x", "looks like a secret"),
    ("agent_env", "NOEQUALS", "NAME=VALUE"),
    ("agent_env", "1BAD=x", "NAME=VALUE"),
    ("agent_tools", "/nonexistent/tools", "not a directory"),
    ("agent_tools", "/", "holds the harness's state"),
]


@pytest.mark.parametrize(("field", "value", "says"), _REFUSED)
def test_what_the_harness_keeps_is_refused(field: str, value: str, says: str) -> None:
    given: dict[str, object] = {field: (Path(value),) if field == "agent_tools" else (value,)}
    with pytest.raises(ValueError, match=says):
        RunOptions(task_id=TASK, agent_cmd="true", **given)  # type: ignore[arg-type]


def test_the_command_refuses_them_in_one_line_before_anything_is_made(short_tmp: Path) -> None:
    for flag, value, says in [
        ("--agent-env", "GH_TOKEN=ghp_x", "looks like a secret"),
        ("--agent-tools", "/nonexistent/tools", "not a directory"),
    ]:
        proc = _run(short_tmp, "--agent", "true", flag, value)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert says in proc.stderr and "Traceback" not in proc.stderr
        assert not (short_tmp / "run").exists()


def test_the_home_directory_holding_the_state_is_refused_as_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".local" / "state").mkdir(parents=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    with pytest.raises((InvalidArgumentError, ValueError), match="harness's state"):
        RunOptions(task_id=TASK, agent_cmd="true", agent_tools=(home,))


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="AGENT_FLAG is given twice"):
        RunOptions(task_id=TASK, agent_cmd="true", agent_env=("AGENT_FLAG=1", "AGENT_FLAG=2"))


def test_harmless_names_with_secret_words_inside_pass() -> None:
    opts = RunOptions(
        task_id=TASK,
        agent_cmd="true",
        agent_env=("GIT_AUTHOR_NAME=agent", "DISABLE_TELEMETRY=1", "KEYBOARD_LAYOUT=us"),
    )
    assert opts.agent_env == ("GIT_AUTHOR_NAME=agent", "DISABLE_TELEMETRY=1", "KEYBOARD_LAYOUT=us")


@needs_bwrap
def test_a_program_of_the_tools_dir_passes_the_preflight_named_bare_or_by_path(
    short_tmp: Path,
) -> None:
    from ale_robotics.harness.preflight import check_agent_command
    from ale_robotics.sandboxes import resolve_sandbox

    tools = _tools(short_tmp)
    bwrap = resolve_sandbox("bwrap")
    for cmd in ("agenttool --go", f"{tools}/bin/agenttool --go"):
        with pytest.raises(InvalidArgumentError):  # not on PATH, or not shown inside
            check_agent_command(RunOptions(task_id=TASK, agent_cmd=cmd), ROOT, bwrap)
        opts = RunOptions(task_id=TASK, agent_cmd=cmd, agent_tools=(tools,))
        check_agent_command(opts, ROOT, bwrap)
