"""The ``ale-robotics`` command groups and what every command shares.

Each command lives in a module of its own (``run_cmd``, ``evaluator_cmd``,
``agent_cmd``, ``audit_cmd``, ``check_cmd``, ``tasks_cmd``, ``trajectory``) that
registers it on these Typer apps; :mod:`.main` imports them all. Errors the user
can act on (:class:`~ale_robotics.errors.AleError`) are printed as one red line
with exit code 2; nothing else is caught, so a bug still shows its traceback.

Output rules every command follows: stdout holds the command's data and nothing
else; messages, progress and warnings go to stderr (:data:`console`). A command
that prints data takes ``--json`` and then writes exactly one JSON document with
:func:`emit_json` (never through a rich console, which hard-wraps long lines at
the terminal width, inside strings too). Exit codes: 0 ok, 1 the thing checked
is bad (a rejected submission, a trajectory that does not verify, a failed job),
2 a usage error.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

from ale_robotics.errors import AleError

__all__ = [
    "AleTyper",
    "ExecutorOpt",
    "RayAddressOpt",
    "absolute",
    "app",
    "console",
    "emit_json",
    "evaluator_app",
    "friendly",
    "out",
    "registry_app",
    "tasks_app",
]


def _no_flag_placeholders(params: list[Any]) -> list[Any]:
    """Give flags an empty metavar: typer's rich help otherwise shows the flag's type as
    if it took a value (``--wait <bool>``, ``--help <bool>``)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


def reflowed(text: str | None) -> str | None:
    """Help text whose paragraphs the renderer wraps: the line breaks a docstring has
    in its source are dropped inside each paragraph (Typer's rich help keeps them after
    the first paragraph, so a line broke mid-sentence wherever the source did), while a
    paragraph with an indented line (an example, a YAML block) is kept line for line."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p if p.startswith("\b") or any(line[:1].isspace() for line in p.splitlines())
        else " ".join(line.strip() for line in p.splitlines())
        for p in paragraphs
    )  # fmt: skip


class _Command(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["help"], kwargs["epilog"] = (
            reflowed(kwargs.get("help")),
            reflowed(kwargs.get("epilog")),
        )
        super().__init__(*args, **kwargs)

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_placeholders(super().get_params(ctx))


class _Group(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["help"], kwargs["epilog"] = (
            reflowed(kwargs.get("help")),
            reflowed(kwargs.get("epilog")),
        )
        super().__init__(*args, **kwargs)

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_placeholders(super().get_params(ctx))


class AleTyper(typer.Typer):
    """A Typer app whose commands and groups show no value placeholder on flags, and
    whose help paragraphs the renderer wraps (:func:`reflowed`).

    Every app of the command line is one of these, so the fix reaches every
    command registered with ``@app.command()``, wherever it is defined.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", _Group)
        super().__init__(**kwargs)

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls or _Command, **kwargs)


app = AleTyper(
    name="ale-robotics",
    help="Evaluate AI agents on robotics tasks tied to published papers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
evaluator_app = AleTyper(help="Run the trusted evaluator service.", no_args_is_help=True)
tasks_app = AleTyper(help="List and inspect registered tasks.", no_args_is_help=True)
registry_app = AleTyper(help="Manage the release manifest (targets, budgets).")
app.add_typer(evaluator_app, name="evaluator")
app.add_typer(tasks_app, name="tasks")
app.add_typer(registry_app, name="registry")

console = Console(stderr=True)
"""Messages, progress and warnings: stderr, so stdout stays the command's data."""
out = Console()
"""Human-readable data (tables) on stdout; never for JSON (it wraps long lines)."""

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


def emit_json(doc: object, *, indent: int | None = None) -> None:
    """Write ``doc`` to stdout as one JSON document, never wrapped.

    ASCII only: agent-written text (file names, payloads) is escaped, so no control
    character of it reaches the terminal.
    """
    typer.echo(json.dumps(doc, indent=indent, allow_nan=False))


def absolute(path: Path | None) -> Path | None:
    """``path`` against the caller's directory (the harness later leaves it)."""
    return None if path is None else path.absolute()


ExecutorOpt = Annotated[
    str,
    typer.Option(
        metavar="local|ray",
        help="Where the evaluator runs the rollouts: 'local' (worker processes on this host) "
        "or 'ray' (Ray tasks: a local Ray instance, or the cluster at --ray-address). "
        "Results are identical.",
    ),
]
"""``--executor``, shared by ``run`` (its embedded evaluator) and ``evaluator serve``."""

RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        metavar="ADDR",
        help="With --executor ray: the Ray cluster, e.g. HEAD_IP:6379 or 'auto' (this host "
        "must be one of its nodes, see 'ray start'; default: start a local Ray instance).",
    ),
]
"""``--ray-address``, shared by ``run`` and ``evaluator serve``."""
