"""The ``ale-robotics`` command groups and what every command shares.

Each command lives in a module of its own (``run_cmd``, ``evaluator_cmd``,
``agent_cmd``, ``audit_cmd``, ``tasks_cmd``, ``trajectory``) that registers it on
these Typer apps; :mod:`.main` imports them all. Errors the user can act on
(:class:`~ale_robotics.errors.AleError`) are printed as one red line with exit code
2; nothing else is caught, so a bug still shows its traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from ale_robotics.errors import AleError

__all__ = [
    "absolute",
    "app",
    "console",
    "evaluator_app",
    "friendly",
    "out",
    "registry_app",
    "tasks_app",
]

app = typer.Typer(
    name="ale-robotics",
    help="Evaluate AI agents on robotics tasks tied to published papers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
evaluator_app = typer.Typer(help="Run the trusted evaluator service.", no_args_is_help=True)
tasks_app = typer.Typer(help="List and inspect registered tasks.", no_args_is_help=True)
registry_app = typer.Typer(help="Manage the release manifest (targets, budgets).")
app.add_typer(evaluator_app, name="evaluator")
app.add_typer(tasks_app, name="tasks")
app.add_typer(registry_app, name="registry")

console = Console(stderr=True)
"""Messages, progress and warnings: stderr, so stdout stays the command's data."""
out = Console()

F = TypeVar("F", bound=Callable[..., Any])


def friendly(fn: F) -> F:
    """Print an :class:`AleError` as one red line and exit 2, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AleError as exc:
            console.print("[red]error:[/red] ", end="", highlight=False)
            console.print(exc.message, highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def absolute(path: Path | None) -> Path | None:
    """``path`` against the caller's directory (the harness later leaves it)."""
    return None if path is None else path.absolute()
