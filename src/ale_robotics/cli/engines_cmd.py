"""``ale-robotics engines list|install``: the engine environments rollout kinds run in.

An engine is a Python environment of its own (``ale_robotics.engines``) for simulators
that cannot share the evaluator's: built once per host from the package registries and
cached, under ``$ALE_ENGINES_DIR`` or ``~/.cache/ale-robotics/engines``. Exit codes: 0 ok,
2 a usage error or an engine that cannot be built here (the line says why and what to do).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ale_robotics.cli.app import AleTyper, app, console, emit_json, friendly, out

__all__: list[str] = []

engines_app = AleTyper(
    help="Build and list the engine environments of rollout kinds (MuJoCo Warp...).",
    no_args_is_help=True,
)
app.add_typer(engines_app, name="engines")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead.")]


def _row(name: str) -> dict[str, Any]:
    from ale_robotics.engines import build_dir, engine_key, get_engine, installed, kinds_of
    from ale_robotics.engines.errors import EngineUnavailable

    engine = get_engine(name)
    row: dict[str, Any] = {
        "name": name,
        "summary": engine.summary,
        "python": engine.python,
        "constraints": f"constraints/{engine.constraints}",
        "kinds": kinds_of(name),
        "installed": False,
        "key": None,
        "path": None,
    }
    try:
        row["key"] = engine_key(engine)
        row["path"] = str(build_dir(engine))
        record = installed(engine)
    except EngineUnavailable as exc:
        row["problem"] = exc.message
        return row
    if record is not None:
        row |= {
            "installed": True,
            "python_version": record.python_version,
            "built_at": record.built_at.isoformat(),
            "install_s": record.install_s,
            "warm_up_s": record.warm_up_s,
            "size_bytes": record.size_bytes,
            "versions": {
                d: record.versions.get(d) or record.system_versions.get(d, "not installed")
                for d in engine.reported
            },
        }
    return row


@engines_app.command("list")
@friendly
def engines_list(as_json: JsonOpt = False) -> None:
    """The registered engines: the kinds that run in them, whether each is built here.

    With --json, one document: {"engines": [{"name", "summary", "python", "constraints",
    "kinds", "installed", "key", "path", and once installed "python_version", "built_at",
    "install_s", "warm_up_s", "size_bytes", "versions" (of its simulator stack); "problem"
    when it cannot be built here}]}.
    """
    from ale_robotics.engines import engine_names

    rows = [_row(n) for n in engine_names()]
    if as_json:
        emit_json({"engines": rows})
        return
    if not rows:
        out.print("no engines registered")
        return
    for row in rows:
        state = "installed" if row["installed"] else "not installed"
        out.print(f"[bold]{row['name']}[/bold]  {state}", highlight=False)
        out.print(f"  {row['summary']}", highlight=False)
        kinds = ", ".join(row["kinds"]) or "none"
        out.print(
            f"  Python {row['python']}, {row['constraints']}; kinds: {kinds}", highlight=False
        )
        if row["installed"]:
            gib = row["size_bytes"] / 1024**3
            stack = ", ".join(f"{k} {v}" for k, v in row["versions"].items())
            out.print(f"  {stack}", highlight=False, soft_wrap=False)
            out.print(
                f"  {gib:.2f} GiB; installed in {row['install_s']:.0f} s, "
                f"warm-up {row['warm_up_s']:.0f} s",
                highlight=False,
            )
            out.print(f"  {row['path']}", highlight=False, soft_wrap=True)
        elif "problem" in row:
            out.print(f"  [red]cannot be built here:[/red] {row['problem']}", soft_wrap=True)
        else:
            out.print(f"  install: ale-robotics engines install {row['name']}", highlight=False)


@engines_app.command("install")
@friendly
def engines_install(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="[NAME]...", help="Engines to build (default: every one)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Build again even when a build exists.")
    ] = False,
    pip_args: Annotated[
        list[str] | None,
        typer.Option(
            "--pip-arg",
            metavar="ARG",
            help="An argument for pip install (repeat it), e.g. --pip-arg=--no-index "
            "--pip-arg=--find-links=DIR for an offline build.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Build engine environments once (cached; a build of the same pins is kept).

    Creates a venv of the engine's Python, installs its pinned distributions from the
    package registries (constraints/engine-NAME.txt), checks the install matches the
    pins and imports, and runs the engine's warm-up (MuJoCo Warp: compiles its kernels).
    With --json, one document: {"installed": [the 'engines list --json' row of each]}.
    """
    from ale_robotics.engines import engine_names, get_engine, install

    chosen = names or engine_names()
    engines = [get_engine(n) for n in chosen]  # every name checked before any build
    for engine in engines:
        install(
            engine,
            force=force,
            pip_args=pip_args or (),
            log=lambda line: console.print(line, highlight=False, soft_wrap=True),
        )
    rows = [_row(e.name) for e in engines]
    if as_json:
        emit_json({"installed": rows})
        return
    for row in rows:
        out.print(f"{row['name']}: installed in {row['path']}", highlight=False, soft_wrap=True)
