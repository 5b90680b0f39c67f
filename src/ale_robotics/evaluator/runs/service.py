"""Opening and closing the runs of a shared evaluator (OpenRun, CloseRun).

Opening registers a run with its own agent token and submission directory
(:class:`~.registry.RunRegistry`), once: a run id is single use, because the run's
hidden seeds derive from it. Closing revokes the token first (no new calls),
then closes the run's sessions and cancels its unfinished jobs; it is the one
operation that spans runs, sessions and jobs, so it lives above all three.
"""

from __future__ import annotations

from pathlib import Path

from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError
from ale_robotics.evaluator.batch.jobs import JobService
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.registry import OpenedRun, RunClosed, RunRegistry
from ale_robotics.evaluator.sessions.manager import SessionManager
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.videos import VideoStore

__all__ = ["RunService"]


class RunService:
    """OpenRun and CloseRun over the run registry, the sessions and the jobs."""

    def __init__(
        self,
        runs: RunRegistry,
        access: RunAccess,
        tasks: TaskCatalog,
        ledger: RunLedger,
        jobs: JobService,
        sessions: SessionManager,
        *,
        submission_volume: Path | None,
        videos: VideoStore | None = None,
    ) -> None:
        self._runs = runs
        self._access = access
        self._tasks = tasks
        self._ledger = ledger
        self._jobs = jobs
        self._sessions = sessions
        self._volume = submission_volume
        self._videos = videos

    def open_run(self, run_id: str, task_id: str) -> OpenedRun:
        """Register a run of a shared evaluator: its own agent token and submission directory."""
        bound = self._access.bound_run
        if bound is not None:
            raise FailedPreconditionError(
                f"this evaluator is bound to run {bound!r} (--run-id): its agent uses "
                "the token minted for that run; OpenRun is for shared evaluators"
            )
        if not run_id:
            raise InvalidArgumentError("run_id is required: the harness chooses the run id")
        run = self._access.own_run(run_id)
        task = self._tasks.task(task_id)
        if self._jobs.has_job(run) or self._ledger.has_events(run) or self._sessions.count(run):
            raise FailedPreconditionError(
                f"run {run!r} was used on this evaluator before; run ids are single use "
                "(the run's hidden seeds derive from it): choose a new one"
            )
        return self._runs.open(run, task.id, self._volume)

    def close_run(self, run_id: str) -> RunClosed:
        """End a run: revoke its token first (no new calls), close its sessions, cancel
        its unfinished jobs, forget its videos (the harness fetched them before).

        On an evaluator bound to the run (``--run-id``, the embedded evaluator) the
        agent listener's own token is the run's (minted for it, never the state dir's
        ``agent.token``): it is refused from now on, as a shared evaluator's run token.
        """
        if not run_id:
            raise InvalidArgumentError("run_id is required")
        run = self._access.own_run(run_id)
        if self._access.bound_run is None:
            self._runs.close(run)
        else:
            self._access.close_bound()
        sessions = self._sessions.close_run(run, "the run was closed")
        jobs = self._jobs.cancel_run(run, "the run was closed before the job finished")
        if self._videos is not None:
            self._videos.remove_run(run)
        return RunClosed(sessions_closed=sessions, jobs_cancelled=len(jobs))
