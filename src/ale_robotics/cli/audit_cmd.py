"""``ale-robotics audit``: re-check a finished run with the revealed secret."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ale_robotics.cli.app import app, console, friendly, out

__all__: list[str] = []


@app.command()
@friendly
def audit(
    run_dir: Annotated[Path, typer.Argument(help="The run directory (holds result.json).")],
    secret: Annotated[Path, typer.Option(help="The revealed evaluator secret file.")],
    submission: Annotated[
        Path | None,
        typer.Option(help="The evaluated submission files (default RUN_DIR/submission)."),
    ] = None,
    public_key: Annotated[
        str | None, typer.Option(help="Expected evaluator public key (hex, or a key file).")
    ] = None,
) -> None:
    """Check result.json against the signed trajectory, recompute seeds, re-run, re-score.

    Details quote agent-controlled text (file names, job ids), so everything is
    printed with rich markup off: a name like ``[/x]`` is text, not a tag.
    """
    from rich.text import Text

    from ale_robotics.audit import audit_run, read_secret
    from ale_robotics.trajectory import load_public_key

    try:
        revealed = read_secret(secret)
    except OSError as exc:
        console.print(f"error: cannot read the secret file {secret}: {exc}", markup=False)
        raise typer.Exit(2) from None
    key = None if public_key is None else load_public_key(public_key)
    report = audit_run(run_dir, revealed, submission_dir=submission, public_key=key)
    if report.fatal is not None:
        console.print(f"error: audit failed: {report.fatal}", markup=False, soft_wrap=True)
        raise typer.Exit(1)
    table = Table(title=Text(f"audit of {report.run_id}"))
    table.add_column("check")
    table.add_column("")
    table.add_column("detail")
    for c in report.checks:
        verdict = Text("ok", style="green") if c.ok else Text("FAIL", style="red")
        table.add_row(Text(c.name), verdict, Text(c.detail))
    out.print(table)
    if not report.ok:
        failed = ", ".join(c.name for c in report.checks if not c.ok)
        out.print(f"audit FAILED: {failed}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    out.print("audit OK: seeds, commitments, trajectory and metrics all check out")
