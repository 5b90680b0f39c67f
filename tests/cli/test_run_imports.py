"""``ale-robotics run`` registers only ``run``: its start-up does not import the other commands.

The other commands' modules import the runs index, the HTML report, the audit and
their dependencies; a run's start-up is what its agent (and so the user) waits for.
The console script and ``python -m ale_robotics`` with ``run`` as the command register
only ``run``; anything else (another command, the root's help, a program importing the
app) registers every command. Subprocesses, so that the main module is what it is for
a user.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONSOLE_SCRIPT = str(Path(sys.executable).with_name("ale-robotics"))

_PROBE = (
    "import json, sys, __main__\n"
    "__main__.__file__ = {main_file!r}  # what the console script's main module says\n"
    "sys.argv = {argv!r}\n"
    "import ale_robotics.cli.main as m\n"
    "app = m.app  # what main() loads before it runs the command line\n"
    "print(json.dumps([sorted(sys.modules), sorted(c.name or c.callback.__name__ for c in "
    "app.registered_commands)]))\n"
)


def _after_import(argv: list[str], main_file: str = CONSOLE_SCRIPT) -> tuple[list[str], list[str]]:
    code = _PROBE.format(main_file=main_file, argv=argv)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    mods, commands = json.loads(out.stdout.strip().splitlines()[-1])
    return mods, commands


def test_the_run_command_line_imports_no_other_command() -> None:
    mods, _ = _after_import(["ale-robotics", "run", "td3-inverted-pendulum-v2"])
    assert "ale_robotics.cli.run_cmd" in mods
    others = [m for m in mods if m.startswith("ale_robotics.cli.") and m.endswith("_cmd")]
    assert others == ["ale_robotics.cli.run_cmd"]
    assert not [m for m in mods if m.startswith(("ale_robotics.runs", "ale_robotics.report"))]
    assert "ale_robotics.cli.trajectory" not in mods


@pytest.mark.parametrize(
    ("argv", "main_file"),
    [
        (["ale-robotics", "tasks", "list"], CONSOLE_SCRIPT),  # another command
        (["ale-robotics", "--help"], CONSOLE_SCRIPT),  # the root's help lists them all
        (["ale-robotics", "run"], "/somewhere/else/program.py"),  # a program importing app
    ],
)
def test_anything_else_registers_every_command(argv: list[str], main_file: str) -> None:
    mods, commands = _after_import(argv, main_file)
    assert "ale_robotics.cli.runs_cmd" in mods and "ale_robotics.cli.trajectory" in mods
    assert {"run", "leaderboard", "audit", "check-submission"} <= set(commands)


def test_run_help_is_the_same_either_way() -> None:
    """The lazy registration changes what is imported, never what ``run`` says."""
    lazy = subprocess.run(
        [CONSOLE_SCRIPT, "run", "--help"], capture_output=True, text=True, timeout=120
    )
    code = (
        "import sys\n"
        "sys.argv = ['ale-robotics', 'run', '--help']\n"
        "from ale_robotics.cli.main import app\n"  # -c: every command registered
        "app(prog_name='ale-robotics')\n"
    )
    full = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert lazy.returncode == full.returncode == 0, lazy.stderr + full.stderr
    assert lazy.stdout == full.stdout
