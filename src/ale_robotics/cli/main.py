"""The ``ale-robotics`` command line: the root command and the console entry point.

The commands are in modules of their own, imported here for their registration
on :data:`.app.app`: all of them, except in the process the console entry point
(or ``python -m ale_robotics``) starts for ``ale-robotics run``, which registers
only ``run`` (:func:`_registers_only_run`). The other commands' modules import much
that ``run`` does not need before its agent starts (the runs index, the HTML
report, the audit), and a run's start-up is the time everything else waits for;
what ``run`` parses, prints and does is the same either way.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import threading
from typing import Annotated

import typer

from ale_robotics import __version__
from ale_robotics.cli import run_cmd
from ale_robotics.cli.app import app, out

__all__ = ["app", "exit_without_teardown", "main", "main_is_the_package"]


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


def main() -> None:
    """The console entry point: never import from the working directory (see host_guard)."""
    from ale_robotics.harness.host_guard import safe_sys_path, working_directory

    sys.path[:] = safe_sys_path(sys.path, working_directory())
    os.environ["PYTHONSAFEPATH"] = "1"
    main_is_the_package()
    try:
        app()
    except SystemExit as done:
        if sys.argv[1:2] and sys.argv[1] in _SKIP_TEARDOWN:
            exit_without_teardown(done.code)
        raise


_SKIP_TEARDOWN = frozenset({"run"})
"""Commands whose process ends with :func:`exit_without_teardown`."""


def exit_without_teardown(code: object) -> None:
    """End the process the way the interpreter would, minus tearing its modules down.

    ``ale-robotics run`` ends holding gRPC, pydantic, numpy, matplotlib and the
    evaluator's modules; Python's finalization frees them one by one, a tenth of a
    second and more of a run's wall clock that nothing needs: by then every file of
    the run is written and closed, the evaluator and the agent are stopped. So this
    does what finalization does first (the threads' shutdown, which joins the
    non-daemon threads, then the ``atexit`` handlers, then flushing stdout and
    stderr) and leaves with :func:`os._exit`. Returns, for the normal exit to
    happen, when the code is not an exit status or the streams cannot be flushed.
    """
    if code is None:
        status = 0
    elif isinstance(code, int) and not isinstance(code, bool):
        status = code
    else:
        return
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: let Python report it
        return
    os._exit(status)


def main_is_the_package() -> None:
    """Give the console script's ``__main__`` the spec of ``ale_robotics.__main__``.

    A spawned process (the evaluator's rollout workers) first re-creates its parent's
    main module (``multiprocessing.spawn``): the ``ale-robotics`` console script, a
    file without a module name, would be run again in every worker, importing this
    whole command line (typer, rich, every command and what they import, gRPC and
    cryptography among them: 0.4 s and more per worker) for nothing. A main module
    named ``*.__main__`` is left alone there, as it is for ``python -m ale_robotics``,
    whose main module this one stands for. No-op when ``__main__`` has a spec already.
    """
    main_module = sys.modules.get("__main__")
    if main_module is not None and getattr(main_module, "__spec__", None) is None:
        main_module.__spec__ = importlib.util.find_spec("ale_robotics.__main__")
