"""One job attempt's bookkeeping in the runner, and the operator's bounds on its runs.

Split from :mod:`.runner` so that the runner reads as its loop and its steps: what it is
working on (:class:`CurrentJob`), why it stopped (:class:`Why`), how a step learns it
must stop (:class:`Abandoned`), and the bounds it reads at each use (:class:`RetryPolicy`).

Whose failure, and what it costs:

* A rule broken by the files ends the job ``REJECTED`` (before any episode).
* A policy that outputs a NaN or inf action (or drives a reward or a metric
  non-finite) ends it ``FAILED`` with failure source ``submission`` and the
  episode and step in the official result (:class:`~ale_robotics.model.episode.PolicyFault`). Never
  retried: the inputs are frozen and the rollout deterministic, so a retry fails
  the same way; and scored 0 by the harness, like a rejection. It counts against
  the quota like any evaluated submission.
* A crashed worker or an unexpected error is an infrastructure failure. The job
  is re-run from its snapshot while both bounds allow: at most ``max_attempts``
  attempts per job and at most ``max_infra_retries_per_run`` re-runs in all for
  the run's jobs (default 3, counted from the stored attempt numbers, so a
  restart does not reset it). Past either, the job ends ``FAILED``
  (infrastructure) and the harness voids the run. A job past its deadline ends
  ``TIMED_OUT`` (infrastructure), not retried.
* Infrastructure-failed jobs are free against ``max_submissions`` only up to
  ``free_infra_failures_per_run`` (default 1) per run; beyond, each counts
  (:meth:`~ale_robotics.evaluator.store.JobQueue.quota_used`). Together: a run gets at most
  ``max_submissions`` verdicts however its jobs fail, so a failure cannot be
  turned into a free re-draw.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

__all__ = ["Abandoned", "CurrentJob", "RetryPolicy", "Why", "final_infra_failure"]


class Why(StrEnum):
    """Why the runner stopped working on a job before it ended."""

    CANCELLED = "cancelled"
    LOST = "lost"
    STOPPING = "stopping"


class Abandoned(Exception):
    """Raised inside a job's attempt once the job is no longer this runner's to record."""


@dataclass
class CurrentJob:
    """The job the runner is working on, and whether (why) to drop it."""

    job_id: str
    abort: threading.Event = field(default_factory=threading.Event)
    why: Why | None = None

    def drop(self, why: Why) -> None:
        """Stop the attempt (the first reason given stands)."""
        if self.why is None:
            self.why = why
        self.abort.set()

    def check(self) -> None:
        if self.why is not None:
            raise Abandoned(self.why.value)


class RetryPolicy(Protocol):
    """The operator's bounds on a job's run (see the module docstring): an
    :class:`~ale_robotics.evaluator.config.EvaluatorConfig`, read at each use, so that a
    change applies to the next job."""

    @property
    def job_deadline_s(self) -> float:
        """A job's rollouts past this many seconds end it TIMED_OUT."""

    @property
    def max_attempts(self) -> int:
        """Attempts per job (its first, then re-runs after infrastructure failures)."""

    @property
    def max_infra_retries_per_run(self) -> int:
        """Re-runs after infrastructure failures for all of a run's jobs together."""


def final_infra_failure(attempts: int, used: int, cfg: RetryPolicy, reason: str) -> str | None:
    """Why a job whose attempt ``attempts`` failed by the infrastructure (``reason``) ends
    FAILED, with ``used`` re-runs spent by its run; None: a bound still allows a re-run."""
    if attempts < cfg.max_attempts and used < cfg.max_infra_retries_per_run:
        return None
    if attempts < cfg.max_attempts:
        return (
            f"infrastructure failure after {attempts} attempts (the run has used its "
            f"{cfg.max_infra_retries_per_run} infrastructure retries): {reason}"
        )
    return f"infrastructure failure after {attempts} attempts: {reason}"
