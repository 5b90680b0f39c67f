"""``ale-robotics trajectory``: verify and display a run's trajectory.

This module only parses arguments and sets exit codes; the checks live in
:mod:`ale_robotics.trajectory`. Exit codes: 0 the chain verifies, 1 it does not
(the first bad event and the reason are printed), 2 a usage error (missing
file, unusable ``--public-key``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ale_robotics.trajectory import KeyFileError, load_public_key, render_trajectory, verify_file

__all__ = ["app"]

app = typer.Typer(
    name="trajectory",
    help="Verify and inspect run trajectories (hash-chained, evaluator-signed event logs).",
    no_args_is_help=True,
    add_completion=False,
)

FileArg = Annotated[
    Path,
    typer.Argument(
        metavar="FILE",
        exists=True,
        dir_okay=False,
        readable=True,
        help="A trajectory file, e.g. runs/<run_id>/trajectory.jsonl.",
    ),
]
PublicKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--public-key",
        metavar="KEY",
        help="The evaluator's public key: 64 hex digits, or a file holding the hex or a PEM "
        "key. Pins the key; without it the key published in the trajectory is used, which "
        "shows the evaluator events are consistent but not who made them.",
    ),
]


def _resolve_key(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return load_public_key(value)
    except KeyFileError as exc:
        raise typer.BadParameter(exc.message, param_hint="--public-key") from exc


@app.command()
def verify(
    file: FileArg,
    public_key: PublicKeyOpt = None,
    head: Annotated[
        str | None,
        typer.Option(
            "--head",
            metavar="HASH",
            help="The hash the last event must have (as recorded in the run's result); "
            "detects events removed from the end of the file.",
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="The run the trajectory must belong to."),
    ] = None,
) -> None:
    """Check the whole chain and every evaluator signature; name the first bad event."""
    key = _resolve_key(public_key)
    report = verify_file(file, key, expected_run_id=run_id, expected_head=head)
    typer.echo(report.summary())
    if report.ok and report.key_source == "trajectory":
        typer.echo(
            "note: evaluator key taken from the trajectory itself; pass --public-key to pin it",
            err=True,
        )
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def show(file: FileArg, public_key: PublicKeyOpt = None) -> None:
    """Print the events as a table with signature marks, then the verdict (exit 1 if bad)."""
    key = _resolve_key(public_key)
    report = render_trajectory(file, Console(), key)
    raise typer.Exit(0 if report.ok else 1)
