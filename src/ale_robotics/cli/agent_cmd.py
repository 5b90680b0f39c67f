"""Agent-side commands (``submit``, ``status``) for shell-script agents, from the ALE_* variables.

Both print JSON on one line (``status``) or a job id then a JSON line
(``submit --wait``), unwrapped whatever the terminal width, so a script can pipe
them to ``jq``; ``--json`` makes either print exactly one JSON document.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ale_robotics.cli.app import app, console, emit_json, friendly

if TYPE_CHECKING:
    from ale_robotics.client import JobStatus

__all__: list[str] = []

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead.")]


@app.command()
@friendly
def submit(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="DIR", help="Submission directory (ALE_SUBMISSION_DIR or one inside it)."
        ),
    ] = Path("."),
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the job to end; exit 1 unless it SUCCEEDED.")
    ] = False,
    client_token: Annotated[
        str | None,
        typer.Option(metavar="TOKEN", help="Idempotency key; retrying with it never makes 2 jobs."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Submit a batch artifact (for shell-script agents; uses the ALE_* variables).

    DIR is refused before anything is sent (no job, no quota used) when it does not
    exist, is a file or is empty; 'ale-robotics check-submission' checks the files
    against the contract, also without a job. Prints the job id; with --wait, then
    the final status as one JSON line (as 'status' prints it). With --json, one
    document: {"job_id"} or, with --wait, the final status (job_id, state,
    episodes_done, episodes_total, queue_position, failure_source, failure_reason).
    Exit codes: 0 submitted (with --wait: the job SUCCEEDED), 1 the job ended
    REJECTED, FAILED, TIMED_OUT or CANCELLED, 2 a usage error (a bad DIR, the ALE_*
    variables not set, the evaluator refused the request).
    """
    from ale_robotics.client import AleClient

    with AleClient.from_env() as client:
        job_id = client.submit(path, client_token=client_token)
        if not wait:
            if as_json:
                emit_json({"job_id": job_id})
            else:
                typer.echo(job_id)
            return
        if not as_json:
            typer.echo(job_id)
        st = client.wait(job_id)
    emit_json(_status_dict(st))
    if st.state != "SUCCEEDED":
        source = f" [{st.failure_source}]" if st.failure_source else ""
        reason = st.failure_reason or "(no reason given)"
        console.print(
            f"error: job {job_id} ended {st.state}{source}: {reason}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


@app.command()
@friendly
def status(
    job_id: Annotated[
        str, typer.Argument(metavar="JOB_ID", help="Job id (default: this run's newest).")
    ] = "",
    as_json: Annotated[
        bool, typer.Option("--json", help="Accepted for symmetry: the output is always JSON.")
    ] = False,
) -> None:
    """Print a batch job's state and progress as one JSON line (never a metric).

    Keys: job_id, state, episodes_done, episodes_total, queue_position,
    failure_source, failure_reason.
    Exit codes: 0 ok (whatever the job's state), 2 a usage error (an unknown job,
    the ALE_* variables not set).
    """
    from ale_robotics.client import AleClient

    del as_json  # the output is JSON either way
    with AleClient.from_env() as client:
        emit_json(_status_dict(client.status(job_id)))


def _status_dict(st: JobStatus) -> dict[str, Any]:
    return {
        "job_id": st.job_id,
        "state": st.state,
        "episodes_done": st.episodes_done,
        "episodes_total": st.episodes_total,
        "queue_position": st.queue_position,
        "failure_source": st.failure_source,
        "failure_reason": st.failure_reason,
    }
