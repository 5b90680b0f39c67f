"""A job's lifecycle states and who a failure is attributed to: data, importing nothing of ours.

Shared by the job store (which records them), the official ``EvalResult`` (which
reports them) and every reader of results, so the result schema does not have
to import the store to name a state.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TERMINAL_STATES", "FailureSource", "JobState"]


class JobState(StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.REJECTED, JobState.TIMED_OUT, JobState.CANCELLED}
)


class FailureSource(StrEnum):
    NONE = ""
    SUBMISSION = "submission"
    INFRASTRUCTURE = "infrastructure"
