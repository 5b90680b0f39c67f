"""The agent SDK: talk to an evaluator over the agent channel.

An agent launched by the harness finds everything in its environment::

    client = AleClient.from_env()
    spec = client.get_spec()            # task config, submission contract, budget
    ...write files into client.submission_dir...
    job_id = client.submit()
    status = client.wait(job_id)        # state and progress; never the metric

On a task with checkpoints (the ``checkpoints`` capability), an agent commits its
policy while it trains, and the evaluator measures the learning curve itself::

    ack = client.submit_checkpoint()    # the policy file of submission_dir, now
    ack.index, ack.practice_steps       # never a return

Every gRPC failure becomes the matching :mod:`ale_robotics.errors` class
(translated in :func:`ale_robotics.errors.from_rpc_error`, the one place).

The harness uses the same client on the harness channel; on a shared evaluator
it registers each run with :meth:`AleClient.open_run`, which returns the run's
own agent token and submission directory (what the agent then gets), and the
client closes the runs it opened when it is closed, so no run token outlives
its harness.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from ale_robotics.addresses import normalize_address
from ale_robotics.client.retry import RECONNECT_OPTIONS, RetryClock
from ale_robotics.client.views import (
    FIRST_POLL_S,
    LATE_POLLS,
    CheckpointAck,
    JobStatus,
    RunGrant,
    TaskView,
    poll_interval,
)
from ale_robotics.errors import (
    AleError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    from_rpc_error,
)
from ale_robotics.tasks.contract import SubmissionContract
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

__all__ = [
    "ENV_VARS",
    "FIRST_POLL_S",
    "AleClient",
    "CheckpointAck",
    "JobStatus",
    "RunGrant",
    "TaskView",
    "poll_interval",
]

ENV_VARS = ("ALE_ENDPOINT", "ALE_TOKEN", "ALE_TASK_ID", "ALE_RUN_ID", "ALE_SUBMISSION_DIR")

T = TypeVar("T")

log = logging.getLogger(__name__)


class AleClient:
    """A connection to one evaluator listener, authenticated with its bearer token."""

    def __init__(
        self,
        endpoint: str,
        token: str,
        *,
        task_id: str = "",
        run_id: str = "",
        submission_dir: Path | str | None = None,
        timeout_s: float = 30.0,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        """``credentials``: TLS for a TCP listener an evaluator serves with ``--tls-cert``
        (:meth:`.tls.ClientTls.credentials`); None: plaintext (a Unix socket, loopback)."""
        self.endpoint = normalize_address(endpoint)
        self.task_id = task_id
        self.run_id = run_id
        self.submission_dir = Path(submission_dir) if submission_dir is not None else None
        self.timeout_s = timeout_s
        self._metadata = (("authorization", f"Bearer {token}"),)
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            *RECONNECT_OPTIONS,
        ]
        self._channel = (
            grpc.insecure_channel(self.endpoint, options=options)
            if credentials is None
            else grpc.secure_channel(self.endpoint, credentials, options=options)
        )
        self._stub = pb_grpc.AleEnvStub(self._channel)
        self._opened_runs: list[str] = []
        self._closed = False
        self.retry_window_s = 0.0
        """How long a call keeps retrying an evaluator that is gone (:mod:`.retry`): 0
        for an agent's; the harness sets its ``--evaluator-retry-s`` (every call it
        makes is idempotent: reads, closes, submissions deduplicated by client token)."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> AleClient:
        """Build from the variables the harness sets (``ALE_ENDPOINT``, ``ALE_TOKEN``...)."""
        e = os.environ if env is None else env
        missing = [v for v in ("ALE_ENDPOINT", "ALE_TOKEN") if not e.get(v)]
        if missing:
            raise InvalidArgumentError(
                f"{' and '.join(missing)} not set: run the agent through "
                "'ale-robotics run TASK --agent CMD', or export them by hand"
            )
        return cls(
            e["ALE_ENDPOINT"],
            e["ALE_TOKEN"],
            task_id=e.get("ALE_TASK_ID", ""),
            run_id=e.get("ALE_RUN_ID", ""),
            submission_dir=e.get("ALE_SUBMISSION_DIR") or None,
        )

    def close(self) -> None:
        """Close the runs this client opened (best effort), then the connection.

        During interpreter shutdown (a ``__del__`` or ``atexit`` closing a client) it
        sends nothing and leaves the channel to the process's exit: grpc's channel
        close can block forever once the interpreter is finalizing.
        """
        if self._closed:
            return
        if sys.is_finalizing():
            self._closed = True
            return
        for run_id in list(self._opened_runs):
            try:
                self.close_run(run_id)
            except AleError:  # the evaluator may be gone; a restarted one keeps the run open
                log.warning("could not close run %s on %s", run_id, self.endpoint)
        self._closed = True
        self._channel.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (a session's data plane then stops too)."""
        return self._closed

    def __enter__(self) -> AleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: Callable[..., T],
        request: Any,
        retries: int = 0,
        timeout_s: float | None = None,
    ) -> T:
        if self._closed:
            raise FailedPreconditionError(
                f"this AleClient ({self.endpoint}) is closed: make a new one"
            )
        clock = RetryClock(self.endpoint, retries=retries, window_s=self.retry_window_s)
        while True:
            try:
                timeout = self.timeout_s if timeout_s is None else timeout_s
                return method(request, metadata=self._metadata, timeout=timeout)
            except ValueError as err:  # grpc: "Cannot invoke RPC on closed channel!"
                if "closed channel" not in str(err):
                    raise
                raise FailedPreconditionError(
                    f"this AleClient ({self.endpoint}) is closed: make a new one"
                ) from None
            except grpc.RpcError as err:
                clock.wait_or_raise(from_rpc_error(err))

    def get_spec(self) -> TaskView:
        r = self._call(self._stub.GetSpec, pb.GetSpecRequest(task_id=self.task_id), retries=3)
        task = TaskSpec.model_validate_json(r.task_config_json)
        contract = (
            SubmissionContract.model_validate_json(r.submission_contract_json)
            if r.submission_contract_json
            else None
        )
        return TaskView(
            task=task,
            contract=contract,
            budget_s=r.limits.wall_clock_budget_s,
            max_submissions=r.limits.max_submissions_per_run,
            max_message_bytes=r.limits.max_message_bytes,
            protocol_version=r.protocol_version,
            raw=r,
            training_agent_steps=r.limits.training_agent_steps or None,
            training_agent_steps_used=r.limits.training_agent_steps_used,
            training_steps_enforced=r.limits.training_steps_enforced,
            training_budget=r.limits.training_budget,
            brief=r.brief,
        )

    def _relative(self, path: Path | str) -> str:
        p = Path(path)
        if self.submission_dir is None:
            if p.is_absolute():
                raise InvalidArgumentError(
                    "ALE_SUBMISSION_DIR is not set, so the path must be relative to the volume"
                )
            return p.as_posix()
        root = self.submission_dir.resolve()
        full = (root / p).resolve() if not p.is_absolute() else p.resolve()
        try:
            rel = full.relative_to(root)
        except ValueError:
            raise InvalidArgumentError(
                f"{path} is outside the submission directory {root}; write the files there"
            ) from None
        return "" if rel == Path(".") else rel.as_posix()

    def submit(self, path: Path | str = ".", client_token: str | None = None) -> str:
        """Ask the evaluator to snapshot and evaluate the submission at ``path``.

        Retried on UNAVAILABLE with the same ``client_token``, so a retry can
        never create a second job. With a local ``submission_dir``, a path that
        does not exist, is not a directory or is empty is refused here
        (:class:`InvalidArgumentError`), before any call: such a submission could
        only be rejected, and it would still use one of the run's submissions.
        """
        rel = self._relative(path)
        self._check_local_path(path)
        request = pb.SubmitBatchEvalRequest(
            task_id=self.task_id,
            run_id=self.run_id,
            submission_path=rel,
            client_token=client_token or uuid.uuid4().hex,
        )
        r = self._call(self._stub.SubmitBatchEval, request, retries=3)
        return str(r.job_id)

    def submit_checkpoint(
        self,
        path: Path | str | None = None,
        client_token: str | None = None,
        *,
        timeout_s: float = 300.0,
    ) -> CheckpointAck:
        """Commit the policy at ``path`` (default: the submission directory) as a checkpoint.

        The evaluator snapshots only the contract's policy file there, stamps it
        with its own count of the run's practice steps and answers; it evaluates it
        on hidden seeds when the run's result is built. The answer is the same
        whatever that evaluation finds (never a return, never a failure): a file
        that breaks the contract, or a policy whose actions are NaN, uses up a
        checkpoint like a good one, so check a file first with ``ale-robotics
        check-submission``. Retried on UNAVAILABLE with the same ``client_token``, so
        a retry can never commit a second checkpoint. A path that cannot hold a
        policy is refused here, before any call (:class:`InvalidArgumentError`), as
        by :meth:`submit`.
        """
        where = "." if path is None else path
        rel = self._relative(where)
        self._check_local_path(where)
        request = pb.SubmitCheckpointRequest(
            task_id=self.task_id,
            run_id=self.run_id,
            submission_path=rel,
            client_token=client_token or uuid.uuid4().hex,
        )
        r = self._call(self._stub.SubmitCheckpoint, request, retries=3, timeout_s=timeout_s)
        return CheckpointAck.from_proto(r)

    def _check_local_path(self, path: Path | str) -> None:
        """Refuse a submission path that cannot hold a submission (see :meth:`submit`)."""
        if self.submission_dir is None:
            return  # the path is on the evaluator's volume; only it can look
        p = Path(path)
        full = p if p.is_absolute() else self.submission_dir / p
        check = "; check it first with 'ale-robotics check-submission DIR' (no job, no quota)"
        if not full.exists():
            raise InvalidArgumentError(
                f"submission directory {full} does not exist: write the files the task's "
                "contract names into it, then submit it (nothing was submitted)"
            )
        if not full.is_dir():
            raise InvalidArgumentError(
                f"{full} is not a directory: submit the directory that holds the files "
                f"({full.parent}), not a file (nothing was submitted)"
            )
        try:
            empty = next(full.iterdir(), None) is None
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot list submission directory {full}: {exc.strerror} (nothing was submitted)"
            ) from None
        if empty:
            raise InvalidArgumentError(
                f"submission directory {full} is empty: write the files the task's contract "
                f"names first (nothing was submitted){check}"
            )

    def status(self, job_id: str = "") -> JobStatus:
        """A job's status; with no ``job_id``, the newest job of this run."""
        request = pb.GetBatchEvalStatusRequest(job_id=job_id, run_id=self.run_id)
        return JobStatus.from_proto(self._call(self._stub.GetBatchEvalStatus, request, retries=3))

    def wait(
        self,
        job_id: str,
        *,
        timeout_s: float | None = None,
        poll_s: float = 0.5,
        on_progress: Callable[[JobStatus], None] | None = None,
    ) -> JobStatus:
        """Poll until the job is terminal (or ``timeout_s`` passes: TimeoutError).

        The protocol has no push for a job's state, so this polls, at a pace that
        follows the job: the first polls come every :data:`FIRST_POLL_S`, then the
        interval grows with the time waited (a tenth of it) up to ``poll_s``. A short
        job (a few tenths of a second: most smoke runs, small tasks) is seen done
        within about 50 ms instead of up to ``poll_s`` later, and a long one still
        costs the evaluator one call per ``poll_s``.
        """
        start = time.monotonic()
        late = 0
        while True:
            try:
                st = self.status(job_id)
            except DeadlineExceededError:
                # A poll is idempotent: one that came back past its deadline is asked again,
                # a few times in a row. The harness freezes an agent while a host-timed job
                # runs (a ROS graph's, a planner's: its timing is measured), and a poll the
                # freeze caught in flight outlives its deadline meanwhile.
                late += 1
                if late > LATE_POLLS:
                    raise
                continue
            late = 0
            if on_progress is not None:
                on_progress(st)
            if st.terminal:
                return st
            waited = time.monotonic() - start
            if timeout_s is not None and waited > timeout_s:
                raise TimeoutError(f"job {job_id} still {st.state} after {timeout_s:.0f}s")
            time.sleep(poll_interval(waited, poll_s))

    # ------------------------------------------------- runs (harness channel) --

    def open_run(self, run_id: str, task_id: str = "") -> RunGrant:
        """Register a run on a shared evaluator; closed again by :meth:`close_run` or
        :meth:`close`. Not retried: a run id is single use, so a retry would be refused."""
        r = self._call(self._stub.OpenRun, pb.OpenRunRequest(run_id=run_id, task_id=task_id))
        self._opened_runs.append(r.run_id)
        return RunGrant(
            run_id=r.run_id,
            task_id=r.task_id,
            agent_token=r.agent_token,
            submission_dir=r.submission_dir,
            submission_subdir=r.submission_subdir,
        )

    def close_run(self, run_id: str) -> int:
        """End a run: revoke its agent token, close its sessions; returns how many were open."""
        r = self._call(self._stub.CloseRun, pb.CloseRunRequest(run_id=run_id), retries=3)
        if run_id in self._opened_runs:
            self._opened_runs.remove(run_id)
        return int(r.sessions_closed)

    @property
    def stub(self) -> pb_grpc.AleEnvStub:
        return self._stub

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata
