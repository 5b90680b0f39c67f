"""``ale-robotics trajectory``: verify and display a run's trajectory.

This module only parses arguments and sets exit codes; the checks live in
:mod:`ale_robotics.trajectory`. Both commands take a trajectory file or a run
directory; for a run directory the trajectory is also checked against the run's
``result.json`` (a completed or a stopped run's): it must belong to that run, end
with the ``trajectory_head`` recorded there and have its ``trajectory_events``
events, so a trajectory cut after the run no longer verifies.

``verify`` also checks the agent's model transcript, ``model_calls.jsonl`` beside the
trajectory, against the chain's ``model_call`` events (an edited, added or removed line
fails, named).

Exit codes: 0 the chain verifies, 1 it does not (the first bad event and the
reason are printed), 2 a usage error (no such file, no trajectory in the
directory, an unreadable result.json, an unusable ``--public-key``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pydantic
import typer
from rich.console import Console

from ale_robotics.cli.app import AleTyper, console, emit_json, friendly
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.trajectory import (
    KeyFileError,
    load_public_key,
    render_trajectory,
    trajectory_document,
    verified_events,
    verify_document,
)
from ale_robotics.trajectory.transcript import TRANSCRIPT_FILE, check_transcript

__all__ = ["app"]

app = AleTyper(
    name="trajectory",
    help="Verify and inspect run trajectories (hash-chained, evaluator-signed event logs).",
    no_args_is_help=True,
    add_completion=False,
)

PathArg = Annotated[
    Path,
    typer.Argument(
        metavar="PATH",
        help="A trajectory file (runs/<run_id>/trajectory.jsonl), or a run directory: then "
        "its result.json is checked too (the run's head hash and event count).",
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead.")]


@dataclass(frozen=True)
class _Target:
    """The file to check and what the run recorded about it (None: nothing known)."""

    file: Path
    result_json: Path | None = None
    run_id: str | None = None
    head: str | None = None
    events: int | None = None


def _target(path: Path) -> _Target:
    if not path.exists():
        raise InvalidArgumentError(
            f"{path} does not exist: pass a trajectory file or a run directory (runs/<run_id>)"
        )
    if not path.is_dir():
        return _Target(path)
    file = path / "trajectory.jsonl"
    if not file.is_file():
        raise InvalidArgumentError(
            f"no trajectory.jsonl in {path}: pass a run directory (runs/<run_id>) or a "
            "trajectory file"
        )
    result = path / "result.json"
    if not result.exists():
        console.print(
            f"note: no result.json in {path} (the run did not finish): the chain is checked, "
            "but not where it should end",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return _Target(file)
    from ale_robotics.harness.report import load_run_report

    try:
        record = load_run_report(result)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InvalidArgumentError(
            f"cannot read {result} ({exc}); pass {file} to check the chain alone"
        ) from None
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise InvalidArgumentError(
            f"{result} is not a run report ({where}: {first['msg']}); pass {file} to check "
            "the chain alone"
        ) from None
    return _Target(
        file,
        result_json=result,
        run_id=record.run_id,
        head=record.trajectory_head or None,
        events=record.trajectory_events or None,
    )


def _resolve_key(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return load_public_key(value)
    except KeyFileError as exc:
        raise InvalidArgumentError(f"--public-key: {exc.message}") from None


def _recorded(target: _Target, head: str | None, run_id: str | None) -> dict[str, Any]:
    return {
        "result_json": None if target.result_json is None else str(target.result_json),
        "run_id": run_id,
        "head": head,
        "events": target.events,
    }


@app.command()
@friendly
def verify(
    path: PathArg,
    public_key: PublicKeyOpt = None,
    head: Annotated[
        str | None,
        typer.Option(
            "--head",
            metavar="HASH",
            help="The hash the last event must have (default, for a run directory: the one "
            "its result.json records); detects events removed from the end of the file.",
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            metavar="RUN_ID",
            help="The run the trajectory must belong to (default, for a run directory: its "
            "result.json's).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the whole chain and every evaluator signature; name the first bad event.

    Then the model transcript beside it (model_calls.jsonl), line by line, against the
    chain's model_call events: a line edited, added or removed fails, named.

    Prints one line, 'OK: N events ...' or 'FAIL at event N: reason'. With --json,
    one document: ok, path, events, head, first_bad_event, line, reason, summary,
    run_id, counts, eval_events, public_key, key_source, and 'expected' (what the
    trajectory was checked against: result_json, run_id, head, events).
    Exit codes: 0 it verifies, 1 it does not, 2 a usage error.
    """
    key = _resolve_key(public_key)
    target = _target(path)
    head = head or target.head
    run_id = run_id or target.run_id
    report, events = verified_events(
        target.file,
        key,
        expected_run_id=run_id,
        expected_head=head,
        expected_events=target.events,
    )
    # The agent's model transcript beside it must be the one its model_call events record.
    transcript = target.file.parent / TRANSCRIPT_FILE
    problem = None if events is None else check_transcript(events, transcript)
    if as_json:
        emit_json(
            {
                **verify_document(report),
                "expected": _recorded(target, head, run_id),
                "transcript": {
                    "path": str(transcript),
                    "present": transcript.is_file(),
                    "ok": report.ok and problem is None,
                    "reason": problem,
                },
            }
        )
    elif problem is not None:
        typer.echo(f"FAIL: {problem} (the chain itself verifies: {report.summary()})")
    else:
        line = report.summary()
        if report.ok and transcript.is_file():
            line += f"; {TRANSCRIPT_FILE} matches its model_call events"
        if report.ok and target.result_json is not None:
            line += f"; it ends where {target.result_json} says (head {report.head_hash})"
        typer.echo(line)
    if problem is not None:
        raise typer.Exit(1)
    if report.ok and report.key_source == "trajectory":
        console.print(
            "note: evaluator key taken from the trajectory itself; pass --public-key to pin it",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    raise typer.Exit(0 if report.ok else 1)


@app.command()
@friendly
def show(path: PathArg, public_key: PublicKeyOpt = None, as_json: JsonOpt = False) -> None:
    """Print the events as a table with signature marks, then the verdict.

    The table keeps seq, time, level, kind and the signature mark whole at any
    width; the payload is cut to fit. With --json, one document: path, events
    (line, seq, time, level, kind, payload, hash, prev_hash, signature: valid,
    invalid, missing or unsigned; error for a line that does not parse), verify (as
    'verify --json' prints it) and expected.
    Exit codes: 0 it verifies, 1 it does not, 2 a usage error.
    """
    key = _resolve_key(public_key)
    target = _target(path)
    if as_json:
        doc = trajectory_document(
            target.file,
            key,
            expected_run_id=target.run_id,
            expected_head=target.head,
            expected_events=target.events,
        )
        emit_json({**doc, "expected": _recorded(target, target.head, target.run_id)})
        ok = bool(doc["verify"]["ok"])
    else:
        # a console made now: it takes the width (COLUMNS) of this invocation
        report = render_trajectory(
            target.file,
            Console(),
            key,
            expected_run_id=target.run_id,
            expected_head=target.head,
            expected_events=target.events,
        )
        ok = report.ok
    raise typer.Exit(0 if ok else 1)
