"""A run that ends without a score: interrupted by the operator, or failed by the infrastructure.

Either way the trajectory is closed (a ``run_interrupted`` or ``run_failed`` event) and
``result.json`` says why, in which phase, with what was cancelled and the agent's exit
code: :func:`record_interrupt` (which also cancels the run's unfinished jobs and makes
the :class:`RunInterruptedError` that :mod:`.run` raises) and :func:`record_failure`.
Apart from :mod:`.run` so that the run reads as its steps, and what a stopped run
records is read in one place.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ale_robotics.errors import AleError
from ale_robotics.harness.report import StoppedRunReport, write_stopped
from ale_robotics.harness.run_context import RunContext

__all__ = ["RunInterruptedError", "record_failure", "record_interrupt"]


class RunInterruptedError(AleError):
    """The operator stopped the run (Ctrl-C, SIGTERM): nothing was scored.

    Raised by :func:`.run.run_task` after the clean-up: the agent stopped, the run's
    unfinished jobs cancelled, a ``run_interrupted`` event closing the trajectory and
    ``result.json`` written with state ``interrupted``.
    """

    def __init__(self, message: str, *, signal_name: str, run_id: str, run_dir: Path) -> None:
        super().__init__(message)
        self.signal_name = signal_name
        self.run_id = run_id
        self.run_dir = run_dir


def record_interrupt(ctx: RunContext, signal_name: str) -> RunInterruptedError:
    """Close the trajectory and write result.json for a run the operator stopped."""
    phase = ctx.phase
    cancelled = phase.cancel() if phase.cancel is not None else []
    reason = f"interrupted by {signal_name} during the {_PHASE_WORDS[phase.name]}"
    wall = ctx.elapsed()
    last = ctx.traj.append(
        "harness",
        "run_interrupted",
        {
            "signal": signal_name,
            "phase": phase.name,
            "cancelled_jobs": cancelled,
            "agent_exit_code": phase.agent_exit_code,
            "elapsed_s": round(wall, 3),
        },
    )
    write_stopped(
        ctx.run_dir,
        StoppedRunReport(
            state="interrupted",
            run_id=ctx.run_id,
            task_id=ctx.task.id,
            agent_cmd=ctx.opts.agent_cmd,
            reason=reason,
            signal=signal_name,
            phase=phase.name,
            cancelled_jobs=cancelled,
            agent_exit_code=phase.agent_exit_code,
            wall_s=wall,
            trajectory_head=last.hash,
            label=ctx.label,
            inspect=ctx.inspect,
            repetition=ctx.opts.repetition,
            agent_seed=ctx.opts.agent_seed,
            started_at=ctx.started_at,
            ended_at=dt.datetime.now(dt.UTC),
        ),
        ctx.traj.path,
    )
    jobs = f"; {len(cancelled)} unfinished job(s) cancelled" if cancelled else ""
    return RunInterruptedError(
        f"run {ctx.run_id} {reason}: the agent was stopped{jobs}; nothing was scored",
        signal_name=signal_name,
        run_id=ctx.run_id,
        run_dir=ctx.run_dir,
    )


_PHASE_WORDS = {
    "setup": "setup (before the agent started)",
    "agent": "agent phase",
    "evaluating": "evaluation (the agent had finished)",
    "scoring": "scoring",
}


def record_failure(ctx: RunContext, reason: str) -> None:
    """Close the trajectory and write result.json for a run the infrastructure failed."""
    phase = ctx.phase
    last = ctx.traj.append("harness", "run_failed", {"reason": reason, "phase": phase.name})
    write_stopped(
        ctx.run_dir,
        StoppedRunReport(
            state="failed",
            run_id=ctx.run_id,
            task_id=ctx.task.id,
            agent_cmd=ctx.opts.agent_cmd,
            reason=reason,
            phase=phase.name,
            agent_exit_code=phase.agent_exit_code,
            wall_s=ctx.elapsed(),
            trajectory_head=last.hash,
            label=ctx.label,
            inspect=ctx.inspect,
            repetition=ctx.opts.repetition,
            agent_seed=ctx.opts.agent_seed,
            started_at=ctx.started_at,
            ended_at=dt.datetime.now(dt.UTC),
        ),
        ctx.traj.path,
    )
