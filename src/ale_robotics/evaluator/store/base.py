"""What every job store shares: its records (jobs, runs), ids and the store's one error.

The interfaces are in :mod:`.ports`, the one SQL implementation in :mod:`.sql`.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from ale_robotics.errors import UnavailableError
from ale_robotics.model.states import TERMINAL_STATES, FailureSource, JobState

__all__ = [
    "DEFAULT_LEASE_S",
    "REQUEUED_REASON",
    "EventMaker",
    "ExpiredLeases",
    "JobRecord",
    "RunRecord",
    "StoreUnavailable",
    "check_job_id",
    "check_token_sha256",
    "new_job_id",
    "new_owner_id",
    "redacted",
]

DEFAULT_LEASE_S = 15.0
"""How long a claim lasts without renewal. The owner renews every third of it, so a
process must miss two renewals in a row (stopped, killed, hung) before another
evaluator may take its job over; and a killed process's job waits at most this long."""


def new_owner_id() -> str:
    """A process's owner id: host and pid for the operator, random so a reused pid differs."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


_JOB_ID_RE = re.compile(r"^job-[0-9a-f]{16}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def new_job_id() -> str:
    """A new job id: ``job-`` and 16 random hex digits (64 bits: never reused).

    :meth:`.ports.JobQueue.create` makes one when not given one; a caller that must put
    something in place under the id before the job exists (its snapshot,
    ``snapshots/<job_id>/``, which any replica may look for as soon as the job is
    queued) makes it here first and passes it in.
    """
    return f"job-{uuid.uuid4().hex[:16]}"


def check_job_id(job_id: str) -> str:
    """``job_id`` if it has the form :func:`new_job_id` makes; ValueError otherwise.

    A job id names a directory (``snapshots/<job_id>/``), so nothing else is stored.
    """
    if not _JOB_ID_RE.match(job_id):
        shown = job_id if len(job_id) <= 40 else job_id[:40] + "..."
        raise ValueError(
            f"job_id {shown!r} is not a job id: 'job-' and 16 lowercase hex digits, "
            "as new_job_id() makes"
        )
    return job_id


def check_token_sha256(digest: str) -> str:
    """``digest`` if it is a SHA-256 in lowercase hex; ValueError otherwise (so a plain
    token handed to the store by mistake is refused, never stored)."""
    if not _SHA256_RE.match(digest):
        raise ValueError("token_sha256 must be a SHA-256 digest in lowercase hex, not a token")
    return digest


class StoreUnavailable(UnavailableError):
    """The store cannot be reached right now (its database is down, the connection was
    lost, its disk is full): retry later. A gRPC caller gets UNAVAILABLE."""

    def __init__(self, message: str, *, fault: str = "the job store is unavailable") -> None:
        super().__init__(message)
        self.fault = fault
        """What failed, in words that name no path, URL or host: safe to show an agent
        (the message, for the operator's log, may name them)."""


class JobRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: str
    run_id: str
    task_id: str
    client_token: str
    state: JobState
    episodes_done: int
    episodes_total: int
    failure_source: FailureSource
    failure_reason: str
    heartbeat: float
    created: float
    updated: float
    attempts: int
    files: dict[str, str]
    """Snapshot file name -> SHA-256, recorded at submission."""
    result_json: str | None
    owner: str = ""
    """The evaluator process holding the job while RUNNING (:func:`new_owner_id`); kept
    afterwards to show which one ran it last. Empty: never claimed, or requeued."""
    lease_until: float = 0.0
    """Unix time (the store's clock) the owner's claim runs out unless renewed; 0 when
    not RUNNING."""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class ExpiredLeases:
    """What :meth:`.ports.JobQueue.requeue_expired` did with the jobs whose lease ran out."""

    requeued: list[str]
    """Back in the queue, to be re-run from their snapshots."""
    failed: list[str]
    """Ended FAILED (infrastructure) instead: jobs that cannot be re-run (``fail_tokens``)."""


REQUEUED_REASON = "requeued: the evaluator running it stopped renewing its lease"
"""The failure_reason of a job :meth:`.ports.JobQueue.requeue_expired` put back in the queue."""


@dataclass(frozen=True)
class RunRecord:
    """A run opened with OpenRun, as the store keeps it (:class:`.runs.RunRegistry` reads it)."""

    run_id: str
    task_id: str
    token_sha256: str
    """SHA-256 (hex) of the run's agent token; the token itself is never stored."""
    submission_dir: str
    """The run's directory on the shared submission volume; "" when it has none."""
    opened_unix: float
    closed_unix: float = 0.0
    """When CloseRun revoked the token (the store's clock); 0 while the run is open."""

    @property
    def open(self) -> bool:
        return self.closed_unix == 0.0


EventMaker = Callable[[int], str]
"""Makes one event's JSON from its ``eval_seq`` (signing it with that number)."""


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***``, for logs and error messages."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        pieces = parts.query.split("&") if parts.query else []
        secret = [p.split("=", 1)[0] == "password" for p in pieces]
        if parts.password is None and not any(secret):
            return url
        netloc = parts.netloc
        if parts.password is not None:
            userinfo, host = netloc.rsplit("@", 1)
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
        query = "&".join("password=***" if s else p for p, s in zip(pieces, secret, strict=True))
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:  # not parseable as a URL: show the scheme only
        return url.split("://", 1)[0] + "://***"
