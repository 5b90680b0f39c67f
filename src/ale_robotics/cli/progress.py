"""Progress of ``ale-robotics run``: live bars on a terminal, plain lines elsewhere.

Rich draws nothing until the end when stderr is not a terminal (CI logs, ``2>
run.log``, a script reading the pipe), so an operator would see a silent run
for the whole training budget. :class:`PlainProgress` prints one line every
few seconds instead, and at once when the phase or the job's state changes.

While the agent runs, both show what it is doing: its last line of output (or the
model gateway's last refusal), and, once it has made no model or evaluator call for
``--agent-idle-s``, that it is idle (:mod:`ale_robotics.harness.agent.activity`): a
stuck agent is visible, not only a long one.
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
from ale_robotics.harness.agent.activity import AgentActivity

__all__ = ["PlainProgress", "RichProgress", "run_progress"]

PLAIN_INTERVAL_S = 5.0


def _describe(
    phase: str,
    job: JobStatus | None,
    elapsed: float,
    budget: float,
    activity: AgentActivity | None = None,
) -> str:
    if phase == "agent":
        text = f"agent running ({elapsed:.0f}s of {budget:.0f}s budget)"
        if job is not None:
            text += f", job {job.state.lower()}"
        if activity is not None and activity.idle:
            text += f", IDLE {activity.idle_s:.0f}s: no model or evaluator call"
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
        self._last_key: tuple[str, str, bool] | None = None
        self._last_said: str | None = None
        self._t0 = time.monotonic()

    def __call__(
        self,
        phase: str,
        job: JobStatus | None,
        elapsed: float,
        budget: float,
        activity: AgentActivity | None = None,
    ) -> None:
        idle = activity is not None and activity.idle
        key = (phase if phase == "agent" else "evaluating", job.state if job else "", idle)
        now = time.monotonic()
        if key == self._last_key and now - self._last_print < self._interval:
            return
        self._last_key, self._last_print = key, now
        line = f"[{now - self._t0:5.0f}s] {_describe(phase, job, elapsed, budget, activity)}"
        self._console.print(line, highlight=False, markup=False, soft_wrap=True)
        said = activity.last_line if activity is not None else None
        if said is not None and said != self._last_said:
            self._last_said = said
            self._console.print(f"        agent: {said}", highlight=False, markup=False)

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class RichProgress:
    """A spinner for the agent phase and a bar over the hidden-seed episodes."""

    def __init__(self, console: Console) -> None:
        self._console = console
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
        self._said = self._progress.add_task("", total=None, visible=False, start=False)
        self._eval_bar: Any = None

    def __call__(
        self,
        phase: str,
        job: JobStatus | None,
        elapsed: float,
        budget: float,
        activity: AgentActivity | None = None,
    ) -> None:
        progress = self._progress
        if phase == "agent":
            text = _describe(phase, job, elapsed, budget, activity)
            progress.update(self._agent_bar, description=text)
            said = activity.last_line if activity is not None else None
            if said is not None:
                width = max(20, self._console.width - 12)
                shown = said if len(said) <= width else said[: width - 1] + "…"
                progress.update(self._said, description=f"  agent: {shown}", visible=True)
            return
        progress.update(self._agent_bar, description="agent finished", total=1, completed=1)
        progress.update(self._said, visible=False)
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
