"""``ale-robotics report`` and ``ale-robotics view``: the runs as a static site.

This module parses arguments, prints and sets exit codes; the site is built by
:mod:`ale_robotics.report`. ``report`` writes the site to a directory (to copy,
archive or publish as a CI artifact); ``view`` builds it and serves it on a
loopback address for a browser on this machine, until Ctrl-C.

Exit codes: 0 ok (``view``: stopped with Ctrl-C or SIGTERM), 2 a usage error (no
such runs root, an ``--out`` that holds something else, a port in use).
"""

from __future__ import annotations

import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from ale_robotics.cli.app import app, console, friendly

if TYPE_CHECKING:
    from ale_robotics.report import SiteBuild

__all__ = ["report", "view"]

RunsRootArg = Annotated[
    Path,
    typer.Argument(
        metavar="RUNS_ROOT",
        help="The directory holding the run directories (what 'ale-robotics run' writes "
        "to; default: ./runs).",
    ),
]


def _say_problems(built: SiteBuild) -> None:
    for line in [*built.warnings, *(f"skipped {p}" for p in built.problems)]:
        console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)


@app.command()
@friendly
def report(
    runs_root: RunsRootArg = Path("runs"),
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Where to write the site: a new or empty directory, or a site built "
            "before (replaced).",
        ),
    ] = Path("report"),
) -> None:
    """Write the runs as a static HTML site: the leaderboard, every run and every eval
    set, one page each, the model's tokens and calls beside each score (where the run's
    model gateway counted them); a run whose result.json disagrees with its signed
    events is marked UNVERIFIED and never ranked.

    The site is self-contained (its stylesheet and plots are copied in;
    nothing is fetched when it is viewed): open DIR/index.html, or serve
    it with 'ale-robotics view'. Prints the path of index.html.

    Exit codes: 0 written, 2 a usage error.
    """
    from ale_robotics.report import build_site

    built = build_site(runs_root, out)
    _say_problems(built)
    console.print(f"report: {_counts(built)} -> {built.out}", markup=False, highlight=False)
    typer.echo(str(built.index))


def _counts(built: SiteBuild) -> str:
    sets = len(built.sets)
    return f"{len(built.pages)} runs, {sets} eval set{'' if sets == 1 else 's'}"


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@app.command()
@friendly
def view(
    runs_root: RunsRootArg = Path("runs"),
    port: Annotated[
        int,
        typer.Option(
            "--port", metavar="N", min=0, max=65535, help="Port to listen on (0: a free one)."
        ),
    ] = 8765,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDR",
            help="Address to listen on. The default is this machine only; another address "
            "shows the runs (agent logs included) to whoever can reach it.",
        ),
    ] = "127.0.0.1",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Build the site into DIR and keep it (default: a temporary directory, "
            "removed on exit).",
        ),
    ] = None,
) -> None:
    """Build the report and serve it on http://HOST:PORT/ until Ctrl-C.

    Prints the URL on stdout once the server listens. The site is built
    once, at the start: restart to see runs finished since.

    Exit codes: 0 stopped with Ctrl-C (or SIGTERM), 2 a usage error (no
    such runs root, a port in use).
    """
    from ale_robotics.report import build_site, serve_directory

    with tempfile.TemporaryDirectory(prefix="ale-report-") as tmp:
        site = out if out is not None else Path(tmp) / "site"
        built = build_site(runs_root, site)
        _say_problems(built)
        server = serve_directory(built.out, host, port)
        if host not in {"127.0.0.1", "localhost", "::1"}:
            console.print(
                f"warning: listening on {host}: anyone who can reach it sees these runs",
                markup=False,
                highlight=False,
            )
        console.print(
            f"serving {_counts(built)} from {built.out}; Ctrl-C stops",
            markup=False,
            highlight=False,
        )
        previous = signal.signal(signal.SIGTERM, _stop)
        try:  # entered before the URL is printed: a Ctrl-C right after it is a clean stop
            typer.echo(server.url)
            sys.stdout.flush()
            server.serve_forever()
        except KeyboardInterrupt:
            console.print("stopped", markup=False, highlight=False)
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.close()
