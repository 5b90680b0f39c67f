"""Submissions the evaluator's own infrastructure failed before their job was stored.

A SubmitBatchEval that meets a fault of the evaluator's storage (a full disk, an I/O
error, a job store that is down) cannot create its job: the store is what failed. Left
at that, the run would look as if the agent never submitted, and score 0 for a fault
that is not the agent's (issue 26, point 7). So the evaluator remembers, per run, the
latest submission a fault stopped, as a job record that exists in memory only: FAILED,
failure source INFRASTRUCTURE, the fault named. :class:`~.jobs.JobService` answers it as
the run's newest job until a job stored after it (the agent's retry that got through)
takes its place, so the harness, polling the run's newest job on its own channel, sees
an infrastructure failure, marks the run ``failed`` and scores nothing.

Held by the process that took the call: an evaluator restarted since, or another
replica sharing the store, does not know it (it then answers as before, no job).
"""

from __future__ import annotations

import threading
import time

from ale_robotics.evaluator.store import JobRecord, new_job_id
from ale_robotics.model.states import FailureSource, JobState

__all__ = ["SubmissionFaults"]


class SubmissionFaults:
    """The latest submission of each run that an infrastructure fault stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_run: dict[str, JobRecord] = {}

    def record(
        self, run_id: str, task_id: str, client_token: str, episodes_total: int, reason: str
    ) -> JobRecord:
        """Remember a submission of ``run_id`` stopped by ``reason`` (replacing an older one)."""
        now = time.time()
        job = JobRecord(
            job_id=new_job_id(),
            run_id=run_id,
            task_id=task_id,
            client_token=client_token,
            state=JobState.FAILED,
            episodes_done=0,
            episodes_total=episodes_total,
            failure_source=FailureSource.INFRASTRUCTURE,
            failure_reason=reason,
            heartbeat=0.0,
            created=now,
            updated=now,
            attempts=0,
            files={},
            result_json=None,
        )
        with self._lock:
            self._by_run[run_id] = job
        return job

    def get(self, job_id: str) -> JobRecord | None:
        """The fault record with this id, if this process holds one."""
        with self._lock:
            return next((j for j in self._by_run.values() if j.job_id == job_id), None)

    def of_run(self, run_id: str) -> JobRecord | None:
        """The run's fault record, if any."""
        with self._lock:
            return self._by_run.get(run_id)

    def newest(self, run_id: str, stored: JobRecord | None) -> JobRecord | None:
        """The run's newest job: ``stored`` (its newest in the store), or the fault record
        when the fault came after it (nothing the agent submitted since got through)."""
        fault = self.of_run(run_id)
        if fault is None or (stored is not None and stored.created > fault.created):
            return stored
        return fault
