"""The ``ale-robotics`` root command and the registration of every other command.

The commands are in modules of their own, imported here for their registration
on :data:`.app.app`: all of them, except in the process the console entry point
(or ``python -m ale_robotics``) starts for ``ale-robotics run``, which registers
only ``run`` (:func:`_registers_only_run`). The other commands' modules import much
that ``run`` does not need before its agent starts (the runs index, the HTML
report, the audit), and a run's start-up is the time everything else waits for;
what ``run`` parses, prints and does is the same either way.

Imported by :func:`.main.main` once it is ready for a Ctrl-C (see there).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from ale_robotics import __version__
from ale_robotics.cli import run_cmd
from ale_robotics.cli.app import app, out

__all__ = ["app"]


def _registers_only_run() -> bool:
    """True in the process of an ``ale-robotics run ...`` command line: the console
    script or ``python -m ale_robotics`` is the main module and ``run`` the command.

    Anything else (another command, ``--help`` of the root, a test or a program that
    imports :data:`app`) gets every command.
    """
    if sys.argv[1:2] != ["run"]:
        return False
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if spec is not None:
        return bool(spec.name == "ale_robotics.__main__")
    return os.path.basename(getattr(main_module, "__file__", "") or "") == "ale-robotics"


def _register_every_command() -> None:
    """Import every command module (each registers its commands on :data:`app`)."""
    from ale_robotics.cli import (  # noqa: F401  # imported for their registration on app
        agent_cmd,
        audit_cmd,
        check_cmd,
        engines_cmd,  # 'engines list|install'
        evalset_cmd,  # 'eval-set'
        evaluator_cmd,
        queue_cmd,  # 'evaluator queue'
        report_cmd,  # 'report' and 'view'
        runs_cmd,  # 'runs' and 'leaderboard'
        tasks_cmd,
    )
    from ale_robotics.cli.trajectory import app as trajectory_app

    app.add_typer(trajectory_app, name="trajectory", help="Verify and show run trajectories.")


_COMMANDS = (run_cmd,)  # imported for its registration on app
if not _registers_only_run():
    _register_every_command()


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out.print(f"ale-robotics {__version__}")
        raise typer.Exit(0)
