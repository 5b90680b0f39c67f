"""``ale-robotics audit``: re-check a finished run with the revealed secret."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ale_robotics.cli.app import app, console, emit_json, friendly, out
from ale_robotics.errors import InvalidArgumentError

if TYPE_CHECKING:
    from ale_robotics.audit import AuditReport
    from ale_robotics.harness.report import RunReport, StoppedRunReport

__all__: list[str] = []

EXIT_STOPPED = 1
"""An interrupted or failed run: nothing was scored, so nothing could be confirmed."""


@app.command()
@friendly
def audit(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (holds result.json)."),
    ],
    secret: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The revealed evaluator secret file (32 bytes, or 64 hex digits) of a "
            "completed run. Default: the embedded evaluator's, "
            "$XDG_STATE_HOME/ale-robotics/evaluator/secret, when it is the run's (a run "
            "started without --state-dir on this machine).",
        ),
    ] = None,
    submission: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="The evaluated submission files (default RUN_DIR/submission)."
        ),
    ] = None,
    public_key: Annotated[
        str | None,
        typer.Option(metavar="KEY", help="Expected evaluator public key (hex, or a key file)."),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            metavar="DIR",
            help="The state dir of the evaluator that ran the run: its snapshots/ckpt-*/ hold "
            "the run's checkpoints, which the audit re-evaluates (default: the --secret file's "
            "directory when it has snapshots/).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout instead.")
    ] = False,
) -> None:
    """Check result.json against the signed trajectory, recompute seeds, re-run, re-score.

    Prints a table of checks, then 'audit OK' or 'audit FAILED: <checks>'. A run
    that was interrupted or failed has no score: the command says so and checks
    only its trajectory. With --json, one document: run_id, run_dir, ok,
    run_state ('completed', 'interrupted' or 'failed'), fatal (why the audit could
    not run, else null), checks (name, ok, detail), failed_checks, stopped (null,
    or the stopped run's state, reason, signal, phase, cancelled_jobs,
    trajectory_events).
    Exit codes: 0 the audit passed, 1 it failed, or the run was interrupted or
    failed (nothing to audit), 2 a usage error (no result.json in RUN_DIR, an
    unreadable secret file, an unusable key).

    Details quote agent-controlled text (file names, job ids), so everything is
    printed as plain text, never as rich markup.
    """
    from rich.text import Text

    from ale_robotics.audit import audit_run, load_report, read_secret, stopped_summary
    from ale_robotics.audit.secret import find_run_secret
    from ale_robotics.harness.report import StoppedRunReport
    from ale_robotics.trajectory import load_public_key

    if not run_dir.exists():
        raise InvalidArgumentError(
            f"{run_dir} does not exist: pass a run directory (runs/<run_id>)"
        )
    if not run_dir.is_dir():
        raise InvalidArgumentError(
            f"{run_dir} is not a directory: pass a run directory (runs/<run_id>)"
        )
    if not (run_dir / "result.json").exists():
        raise InvalidArgumentError(
            f"no result.json in {run_dir}: the run did not finish (or this is not a run directory)"
        )
    key = None if public_key is None else load_public_key(public_key)
    doc = load_report(run_dir / "result.json")
    _check_submission(doc, run_dir, submission)
    if isinstance(doc, StoppedRunReport):
        report = audit_run(run_dir, b"", public_key=key)  # no score: the secret is not used
    else:
        if secret is None:  # the embedded evaluator's own, when it is this run's
            result = None if isinstance(doc, str) else doc.eval_result
            published = result.secret_sha256 if result is not None else None
            secret = find_run_secret(run_dir, published)
            console.print(
                f"secret: {secret} (the embedded evaluator's)", markup=False, soft_wrap=True
            )
        try:
            revealed = read_secret(secret)
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot read the secret file {secret}: {exc.strerror}"
            ) from None
        state = state_dir
        if state is None and (secret.parent / "snapshots").is_dir():
            state = secret.parent
        report = audit_run(
            run_dir, revealed, submission_dir=submission, public_key=key, state_dir=state
        )
    if as_json:
        emit_json(_document(report, run_dir))
    elif report.stopped is not None:
        traj = next((c for c in report.checks if c.name == "trajectory"), None)
        shown = "?" if traj is None else "verifies OK" if traj.ok else f"FAILS: {traj.detail}"
        events = report.stopped.trajectory_events
        typer.echo(
            f"run {report.run_id} was {report.stopped.state} "
            f"({stopped_summary(report.stopped)}): nothing was scored, nothing to audit; "
            f"its trajectory: {events} events, {shown}"
        )
    elif report.fatal is not None:
        console.print(f"error: audit failed: {report.fatal}", markup=False, soft_wrap=True)
    else:
        table = Table(title=Text(f"audit of {report.run_id}"))
        table.add_column("check")
        table.add_column("")
        table.add_column("detail")
        for c in report.checks:
            verdict = Text("ok", style="green") if c.ok else Text("FAIL", style="red")
            table.add_row(Text(c.name), verdict, Text(c.detail))
        out.print(table)
        if report.ok:
            typer.echo("audit OK: seeds, commitments, trajectory and metrics all check out")
        else:
            failed = ", ".join(c.name for c in report.checks if not c.ok)
            typer.echo(f"audit FAILED: {failed}")
    if report.stopped is not None:
        raise typer.Exit(EXIT_STOPPED)
    raise typer.Exit(0 if report.ok else 1)


def _check_submission(
    doc: RunReport | StoppedRunReport | str, run_dir: Path, given: Path | None
) -> None:
    """A batch job's audit re-runs the frozen submission: refuse, before anything runs, a
    submission dir that is not there (a run on a shared evaluator has none in its run dir)."""
    from ale_robotics.harness.report import StoppedRunReport

    # a report that does not load is the audit's own finding (it says why), not this check's
    result = None if isinstance(doc, StoppedRunReport | str) else doc.eval_result
    if result is None or result.state != "SUCCEEDED" or result.outcomes is None:
        return  # nothing of a batch job to re-run
    source = given if given is not None else run_dir / "submission"
    if source.is_dir():
        return
    if given is not None:
        raise InvalidArgumentError(
            f"--submission {given} is not a directory: pass the directory the run's "
            "submission was frozen from"
        )
    raise InvalidArgumentError(
        f"{source} does not exist: a run on a shared evaluator keeps its submission in the "
        f"evaluator's SUBMISSION_DIR/{result.run_id}; pass it with --submission DIR"
    )


def _document(report: AuditReport, run_dir: Path) -> dict[str, Any]:
    stopped = report.stopped
    return {
        "run_id": report.run_id,
        "run_dir": str(run_dir),
        "ok": report.ok,
        "run_state": "completed" if stopped is None else stopped.state,
        "fatal": report.fatal,
        "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks],
        "failed_checks": [c.name for c in report.checks if not c.ok],
        "stopped": None
        if stopped is None
        else {
            "state": stopped.state,
            "reason": stopped.reason,
            "signal": stopped.signal,
            "phase": stopped.phase,
            "cancelled_jobs": list(stopped.cancelled_jobs),
            "trajectory_events": stopped.trajectory_events,
        },
    }
