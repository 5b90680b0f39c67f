"""``ale-robotics check-submission``: the evaluator's contract checks, run locally.

Runs exactly what the evaluator runs on a submission before it evaluates it:
the snapshot with its file-system rules (:func:`~ale_robotics.evaluator.batch.snapshot.
snapshot_submission`: required files, one file per role, plain files, sizes),
then loading the artifact (:func:`~ale_robotics.evaluator.batch.plan.load_artifact`:
safe loaders, tensor keys, shapes, dtypes, finite values; a replay task's
trajectory set, a planning task's configuration) and the evidence formats
(:func:`~ale_robotics.evaluator.batch.evidence.validate_evidence_formats`). Nothing is
submitted: no job, no quota, no evaluator needed. The snapshot is taken into a
temporary directory and removed.

Importing this module registers the command on :data:`.app.app`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from ale_robotics.cli.app import app, emit_json, friendly
from ale_robotics.errors import InvalidArgumentError

__all__: list[str] = []


def _volume_and_path(directory: Path) -> tuple[Path, str]:
    """(volume, relative path) as the evaluator would open ``directory``.

    Inside ``$ALE_SUBMISSION_DIR`` the path is walked from that root, component by
    component, as the evaluator walks it (a symlinked subdirectory is refused);
    elsewhere the directory itself is the volume.
    """
    root = os.environ.get("ALE_SUBMISSION_DIR")
    if root:
        try:
            rel = directory.absolute().relative_to(Path(root).absolute())
        except ValueError:
            pass
        else:
            return Path(root).absolute(), rel.as_posix()
    return directory.absolute(), "."


@app.command("check-submission")
@friendly
def check_submission(
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="The submission directory (default: $ALE_SUBMISSION_DIR, else '.').",
            show_default=False,
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            metavar="TASK_ID",
            help="The task whose contract applies (default: $ALE_TASK_ID).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout instead.")
    ] = False,
) -> None:
    """Check a submission against the task's contract, with the evaluator's own code.

    No job is created and no submission is used. Prints 'ok: DIR satisfies the
    contract of TASK: files ...' or 'rejected: ...' with the evaluator's exact
    reason (the file and the rule). With --json, one document: ok, task_id, dir,
    files (name, role, format, bytes, sha256 of each file the contract names),
    rejection (null, or file, rule, detail, reason).
    Exit codes: 0 it satisfies the contract, 1 the evaluator would reject it, 2 a
    usage error (no task given, an unknown or interactive task, DIR missing or not
    a directory).
    """
    from ale_robotics.evaluator.batch.evidence import validate_evidence_formats
    from ale_robotics.evaluator.batch.plan import load_artifact
    from ale_robotics.evaluator.batch.snapshot import snapshot_submission
    from ale_robotics.submission.rejected import SubmissionRejected
    from ale_robotics.tasks import default_registry

    task_id = task or os.environ.get("ALE_TASK_ID", "")
    if not task_id:
        raise InvalidArgumentError(
            "which task? pass --task TASK_ID (or set ALE_TASK_ID); "
            "'ale-robotics tasks list' shows them"
        )
    spec = default_registry().get(task_id)
    if spec.contract is None:
        raise InvalidArgumentError(
            f"task {spec.id} is {spec.mode.value}: it has no submission contract to check "
            "(its policy is evaluated in an eval session, not from files)"
        )
    if directory is None:
        directory = Path(os.environ.get("ALE_SUBMISSION_DIR") or ".")
    if not directory.exists():
        raise InvalidArgumentError(
            f"{directory} does not exist: pass the directory the submission files are in"
        )
    if not directory.is_dir():
        raise InvalidArgumentError(
            f"{directory} is not a directory: pass the directory that holds the files "
            f"({directory.parent}), not a file"
        )
    volume, rel = _volume_and_path(directory)
    doc: dict[str, Any] = {"ok": False, "task_id": spec.id, "dir": str(directory), "files": []}
    with tempfile.TemporaryDirectory(prefix="ale-check-") as tmp:
        try:
            files = snapshot_submission(volume, rel, spec.contract, Path(tmp) / "snapshot")
            doc["files"] = [
                {
                    "name": f.name,
                    "role": f.role,
                    "format": str(f.format),
                    "bytes": f.path.stat().st_size,
                    "sha256": f.sha256,
                }
                for f in files
            ]
            load_artifact(files, spec)
            validate_evidence_formats(files)
        except SubmissionRejected as exc:
            doc["rejection"] = {
                "file": exc.file,
                "rule": exc.rule,
                "detail": exc.detail,
                "reason": str(exc),
            }
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot read the submission in {directory}: {exc}"
            ) from None
        else:
            doc["ok"] = True
            doc["rejection"] = None
    if as_json:
        emit_json(doc)
    elif doc["ok"]:
        listed = ", ".join(f"{f['name']} ({f['role']}, {f['bytes']} bytes)" for f in doc["files"])
        typer.echo(f"ok: {directory} satisfies the contract of {spec.id}: files {listed}")
    else:
        typer.echo(
            f"rejected: {directory} does not satisfy the contract of {spec.id}: "
            f"{doc['rejection']['reason']}"
        )
    raise typer.Exit(0 if doc["ok"] else 1)
