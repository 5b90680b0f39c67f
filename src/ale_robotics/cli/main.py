"""The ``ale-robotics`` command line: the root command and the console entry point.

The commands are in modules of their own, imported here for their registration
on :data:`.app.app`.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from ale_robotics import __version__
from ale_robotics.cli import agent_cmd, audit_cmd, check_cmd, evaluator_cmd, run_cmd, tasks_cmd
from ale_robotics.cli import evalset_cmd as evalset_cmd  # registers 'eval-set'
from ale_robotics.cli import report_cmd as report_cmd  # registers 'report' and 'view'
from ale_robotics.cli import runs_cmd as runs_cmd  # registers 'runs' and 'leaderboard'
from ale_robotics.cli.app import app, out
from ale_robotics.cli.trajectory import app as trajectory_app

__all__ = ["app", "main"]

# imported for their registration on app
_COMMANDS = (agent_cmd, audit_cmd, check_cmd, evaluator_cmd, run_cmd, tasks_cmd)
app.add_typer(trajectory_app, name="trajectory", help="Verify and show run trajectories.")


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out.print(f"ale-robotics {__version__}")
        raise typer.Exit(0)


def main() -> None:
    """The console entry point: never import from the working directory (see host_guard)."""
    from ale_robotics.harness.host_guard import safe_sys_path, working_directory

    sys.path[:] = safe_sys_path(sys.path, working_directory())
    os.environ["PYTHONSAFEPATH"] = "1"
    app()
