"""``submit`` and ``status`` for shell-script agents: they use the ALE_* variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ale_robotics.cli.app import app, friendly, out

__all__: list[str] = []


@app.command()
@friendly
def submit(
    path: Annotated[
        Path, typer.Argument(help="Submission directory (inside ALE_SUBMISSION_DIR).")
    ] = Path("."),
    wait: Annotated[bool, typer.Option(help="Wait for a terminal state.")] = False,
    client_token: Annotated[
        str | None, typer.Option(help="Idempotency key; retrying with it never makes 2 jobs.")
    ] = None,
) -> None:
    """Submit a batch artifact (for shell-script agents; uses the ALE_* variables)."""
    from ale_robotics.client import AleClient

    with AleClient.from_env() as client:
        job_id = client.submit(path, client_token=client_token)
        out.print(job_id)
        if wait:
            st = client.wait(job_id)
            out.print(json.dumps(_status_dict(st)))


@app.command()
@friendly
def status(
    job_id: Annotated[str, typer.Argument(help="Job id (default: this run's newest).")] = "",
) -> None:
    """Print a batch job's state and progress as JSON (never a metric)."""
    from ale_robotics.client import AleClient

    with AleClient.from_env() as client:
        out.print(json.dumps(_status_dict(client.status(job_id))))


def _status_dict(st: Any) -> dict[str, Any]:
    return {
        "job_id": st.job_id,
        "state": st.state,
        "episodes_done": st.episodes_done,
        "episodes_total": st.episodes_total,
        "queue_position": st.queue_position,
        "failure_source": st.failure_source,
        "failure_reason": st.failure_reason,
    }
