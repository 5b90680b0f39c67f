"""Progress of ``ale-robotics run``: live bars on a terminal, plain lines elsewhere.

Rich draws nothing until the end when stderr is not a terminal (CI logs, ``2>
run.log``, a script reading the pipe), so an operator would see a silent run
for the whole training budget. :class:`PlainProgress` prints one line every
few seconds instead, and at once when the phase or the job's state changes.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ale_robotics.client.sdk import JobStatus

__all__ = ["PlainProgress", "RichProgress", "run_progress"]

PLAIN_INTERVAL_S = 5.0


def _describe(phase: str, job: JobStatus | None, elapsed: float, budget: float) -> str:
    if phase == "agent":
        text = f"agent running ({elapsed:.0f}s of {budget:.0f}s budget)"
        if job is not None:
            text += f", job {job.state.lower()}"
        return text
    if job is None:
        return "agent finished"
    done = f"{job.episodes_done}/{job.episodes_total} episodes"
    return f"evaluating on hidden seeds: {done} ({job.state.lower()})"


class PlainProgress:
    """One plain line per ``interval`` seconds, and on every change of phase or state."""

    def __init__(self, console: Console, interval: float = PLAIN_INTERVAL_S) -> None:
        self._console = console
        self._interval = interval
        self._last_print = float("-inf")
        self._last_key: tuple[str, str] | None = None
        self._t0 = time.monotonic()

    def __call__(self, phase: str, job: JobStatus | None, elapsed: float, budget: float) -> None:
        key = (phase if phase == "agent" else "evaluating", job.state if job else "")
        now = time.monotonic()
        if key == self._last_key and now - self._last_print < self._interval:
            return
        self._last_key, self._last_print = key, now
        line = f"[{now - self._t0:5.0f}s] {_describe(phase, job, elapsed, budget)}"
        self._console.print(line, highlight=False, markup=False, soft_wrap=True)

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class RichProgress:
    """A spinner for the agent phase and a bar over the hidden-seed episodes."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._agent_bar = self._progress.add_task("agent running", total=None)
        self._eval_bar: Any = None

    def __call__(self, phase: str, job: JobStatus | None, elapsed: float, budget: float) -> None:
        progress = self._progress
        if phase == "agent":
            progress.update(self._agent_bar, description=_describe(phase, job, elapsed, budget))
            return
        progress.update(self._agent_bar, description="agent finished", total=1, completed=1)
        if job is None:
            return
        if self._eval_bar is None:
            self._eval_bar = progress.add_task(
                "evaluating on hidden seeds", total=job.episodes_total
            )
        progress.update(
            self._eval_bar,
            completed=job.episodes_done,
            total=job.episodes_total,
            description=f"evaluating on hidden seeds ({job.state.lower()})",
        )

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


def run_progress(console: Console) -> RichProgress | PlainProgress:
    """Live bars when ``console`` is a terminal, plain timed lines otherwise."""
    return RichProgress(console) if console.is_terminal else PlainProgress(console)
