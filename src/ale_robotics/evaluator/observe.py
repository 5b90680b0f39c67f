"""What the evaluator's services report as they work, for whoever counts it (metrics).

The services report through the small :class:`Observer` protocol, so none imports a
metrics library: the runner's job store is wrapped by :func:`observed_queue` (an attempt
is a claim, a job's end its ``finish``, an infrastructure retry a ``requeue``), the
session manager reports the agent steps of each call, the executor each shard's
seconds. :class:`Observers` is the evaluator's one fan-out, empty until something (the
Prometheus endpoint, :mod:`.server.metrics`) is added, so reporting costs nothing then.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol, cast

from ale_robotics.evaluator.store import JobQueue, JobRecord
from ale_robotics.model.states import FailureSource, JobState

__all__ = ["Observer", "Observers", "observed_queue"]


class Observer(Protocol):
    """Receives what the evaluator's services report; each call must return quickly."""

    def attempt_started(self) -> None:
        """The runner claimed a job (one attempt, the first or a re-run)."""

    def job_ended(self, state: JobState, source: FailureSource, seconds: float) -> None:
        """An attempt ended the job in a terminal ``state`` after ``seconds``."""

    def job_retried(self, seconds: float) -> None:
        """An attempt failed by the infrastructure and the job was requeued."""

    def shard_finished(self, seconds: float) -> None:
        """A shard of episodes took ``seconds`` on its worker."""

    def agent_steps(self, n: int) -> None:
        """Interactive sessions took ``n`` env steps for their agents."""


class Observers:
    """All the observers of one evaluator; reports go to each in turn."""

    def __init__(self) -> None:
        self._all: list[Observer] = []

    def add(self, observer: Observer) -> None:
        self._all = [*self._all, observer]  # a new list: readers never see it change

    def remove(self, observer: Observer) -> None:
        self._all = [o for o in self._all if o is not observer]

    def attempt_started(self) -> None:
        for o in self._all:
            o.attempt_started()

    def job_ended(self, state: JobState, source: FailureSource, seconds: float) -> None:
        for o in self._all:
            o.job_ended(state, source, seconds)

    def job_retried(self, seconds: float) -> None:
        for o in self._all:
            o.job_retried(seconds)

    def shard_finished(self, seconds: float) -> None:
        for o in self._all:
            o.shard_finished(seconds)

    def agent_steps(self, n: int) -> None:
        for o in self._all:
            o.agent_steps(n)


class _ObservedQueue:
    """``queue`` as it is, reporting the runner's claims, ends and retries to ``observer``."""

    def __init__(self, queue: JobQueue, observer: Observer) -> None:
        self._queue = queue
        self._observer = observer
        self._claimed: dict[str, float] = {}  # job id -> monotonic time of its claim
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        job = self._queue.claim_next(run_id=run_id)
        if job is not None:
            with self._lock:
                self._claimed[job.job_id] = time.monotonic()
            self._observer.attempt_started()
        return job

    def _seconds(self, job_id: str) -> float:
        with self._lock:
            start = self._claimed.pop(job_id, None)
        return 0.0 if start is None else time.monotonic() - start

    def finish(self, job_id: str, state: JobState, **fields: Any) -> bool:
        ended = self._queue.finish(job_id, state, **fields)
        if ended and fields.get("owned"):
            source = fields.get("failure_source", FailureSource.NONE)
            self._observer.job_ended(state, source, self._seconds(job_id))
        return ended

    def requeue(self, job_id: str, reason: str) -> bool:
        requeued = self._queue.requeue(job_id, reason)
        if requeued:
            self._observer.job_retried(self._seconds(job_id))
        return requeued

    def release(self, job_id: str) -> bool:
        self._seconds(job_id)  # claimed but never started: no attempt to report
        return self._queue.release(job_id)


def observed_queue(queue: JobQueue, observer: Observer) -> JobQueue:
    """``queue`` for the runner, its claims, ends and retries reported to ``observer``."""
    return cast(JobQueue, _ObservedQueue(queue, observer))
