"""The ``ale-robotics`` command line's entry point.

This module imports nothing but the standard library: the console script imports
it, then calls :func:`main`, which loads the command line (:mod:`.commands`: typer,
pydantic, every command's module; a second and more on a loaded host) inside its own
``try``. A Ctrl-C while that loads is then one line and exit 130, not a traceback of
whatever import it cut short; for ``ale-robotics run``, the line says that nothing
was created, which is true: the run's own Ctrl-C handling (``run_cmd``) starts before
it makes anything. :data:`app` is the command line itself, loaded on first use.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_robotics.cli.app import AleTyper

    app: AleTyper

__all__ = ["app", "exit_without_teardown", "main", "main_is_the_package"]

EXIT_INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a command Ctrl-C stopped."""


def __getattr__(name: str) -> Any:
    """``app``: the root command with every command registered (:mod:`.commands`)."""
    if name == "app":
        from ale_robotics.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The console entry point: never import from the working directory (see host_guard)."""
    from ale_robotics.harness.host_guard import safe_sys_path, working_directory

    sys.path[:] = safe_sys_path(sys.path, working_directory())
    os.environ["PYTHONSAFEPATH"] = "1"
    main_is_the_package()
    try:
        from ale_robotics.cli.commands import app

        app()
    except KeyboardInterrupt:  # while the command line loaded, before any command ran
        if sys.argv[1:2] == ["run"]:
            print("interrupted (SIGINT) before the run started; nothing created", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
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
