"""Runs with no record yet: still going, or lost with their harness.

A run directory holding ``trajectory.jsonl`` but no ``result.json`` is a run whose
harness has not recorded it. While that harness lives it holds the run directory's lock
(:mod:`ale_robotics.harness.run_lock`), and the run is *running*; once the lock is free
the harness died without recording the run (``kill -9``, a host lost): the run is
*lost*, and nothing will finish it. ``ale-robotics runs list`` shows both after the
recorded runs, from the trajectory's first event (``run_started``: the task, label and
start), so that a lost run is seen, not silently missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ale_robotics.harness.run_lock import harness_alive

__all__ = ["UnfinishedRun", "unfinished_run"]

_HEAD_BYTES = 64 * 1024
"""The most of a trajectory read for its first event (a run_started line is far less)."""


class UnfinishedRun(BaseModel):
    """A run directory without ``result.json``: what its trajectory's first event says."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    run_dir: Path
    state: Literal["running", "lost"]
    task_id: str | None = None
    label: str | None = None
    started_at: str | None = None


def unfinished_run(run_dir: Path) -> UnfinishedRun:
    """The run in ``run_dir`` (which has no ``result.json``), running or lost."""
    state: Literal["running", "lost"] = "running" if harness_alive(run_dir) else "lost"
    head = _first_event(run_dir / "trajectory.jsonl")
    payload = head.get("payload") if isinstance(head.get("payload"), dict) else {}
    assert isinstance(payload, dict)

    def text(value: object) -> str | None:
        return value if isinstance(value, str) else None

    return UnfinishedRun(
        run_id=text(head.get("run_id")) or run_dir.name,
        run_dir=run_dir,
        state=state,
        task_id=text(payload.get("task_id")),
        label=text(payload.get("label")),
        started_at=text(payload.get("started_at")),
    )


def _first_event(path: Path) -> dict[str, object]:
    """The trajectory's first line as JSON ({} when it cannot be read as an object)."""
    try:
        with path.open("rb") as fh:
            line = fh.readline(_HEAD_BYTES)
        event = json.loads(line)
    except (OSError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}
