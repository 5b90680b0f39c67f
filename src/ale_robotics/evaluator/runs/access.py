"""Which run a call acts for, and what of other runs it may see.

One object answers it for every service (jobs, sessions, runs, the servicer),
from the caller's :class:`~.registry.Scope` (its token, never a request field),
the run this evaluator is bound to (``--run-id``) and the runs opened with
OpenRun (:class:`~.registry.RunRegistry`): a bound caller acts for its run only,
the state dir's shared agent token never for a run opened with OpenRun, and
another run's job or session is answered as an id that never existed.
"""

from __future__ import annotations

import re
import time
from pathlib import Path, PurePosixPath

from ale_robotics.errors import InvalidArgumentError, PermissionDeniedError
from ale_robotics.evaluator.runs.registry import (
    NO_RUN_MESSAGE,
    PRACTICE_MESSAGE,
    TRUSTED,
    Access,
    RunRegistry,
    Scope,
)

__all__ = ["RunAccess", "check_client_token", "check_run_id"]

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_RUN_ID_RULE = "run_id must be 1-64 characters of letters, digits, '.', '_' or '-'"


_CLIENT_TOKEN_RE = re.compile(r"^[\x21-\x7e]{1,128}$")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is a well-formed run id; INVALID_ARGUMENT naming the rule otherwise."""
    if not _RUN_ID_RE.match(run_id):
        raise InvalidArgumentError(_RUN_ID_RULE)
    return run_id


def check_client_token(client_token: str) -> None:
    """INVALID_ARGUMENT unless ``client_token`` is an idempotency key of SubmitBatchEval and
    SubmitCheckpoint: 1-128 printable ASCII characters."""
    if not _CLIENT_TOKEN_RE.match(client_token):
        raise InvalidArgumentError(
            "client_token must be 1-128 printable ASCII characters (an idempotency key)"
        )


class RunAccess:
    """Checks the run of each call against the caller's scope and the evaluator's binding."""

    def __init__(
        self, runs: RunRegistry, *, bound_run: str | None, submission_volume: Path | None
    ) -> None:
        self._runs = runs
        self.bound_run = bound_run
        """The run this evaluator is embedded in (``--run-id``); None: a shared evaluator."""
        self._volume = submission_volume
        self._bound_closed = False
        self._last_call: dict[str, float] = {}

    def touch(self, scope: Scope) -> None:
        """An agent's call for ``scope``'s run arrived (an RPC on the agent channel, a Step
        or Reset of any transport): :meth:`last_agent_call` says when. This process's own
        count: a replica answers for the calls it served."""
        if scope.run_id:
            self._last_call[scope.run_id] = time.time()  # one store: atomic under the GIL

    def last_agent_call(self, run_id: str) -> float:
        """When the run's agent last called this evaluator (seconds since the epoch; 0.0:
        not yet). The harness reports an agent idle too long (GetRunActivity)."""
        return self._last_call.get(run_id, 0.0)

    def close_bound(self) -> None:
        """CloseRun of the bound run: from now on its agent token is refused (the listener
        asks :meth:`closed` on every call) and it takes no new session or checkpoint."""
        self._bound_closed = True

    def own_run(self, run_id: str) -> str:
        """The run an operator's call is for (empty: the bound run); refuses a malformed one
        and, on a bound evaluator, any other run."""
        if not run_id:
            if self.bound_run is None:
                raise InvalidArgumentError("run_id is required (the harness sets ALE_RUN_ID)")
            return self.bound_run
        if not _RUN_ID_RE.match(run_id):
            raise InvalidArgumentError(_RUN_ID_RULE)
        if self.bound_run is not None and run_id != self.bound_run:
            raise PermissionDeniedError(f"this evaluator only accepts run {self.bound_run!r}")
        return run_id

    def check_run(self, run_id: str, scope: Scope = TRUSTED) -> str:
        """The run a call is for: the caller's run when empty; refuses a malformed or foreign one.

        A bound caller (a run's token) acts for its run only, whatever the request
        says; the state dir's shared agent token never acts for a run opened with
        OpenRun, and on a per-run-token evaluator for no run at all.
        """
        if run_id and not _RUN_ID_RE.match(run_id):
            raise InvalidArgumentError(_RUN_ID_RULE)
        if scope.access is Access.RUN:
            if run_id and run_id != scope.run_id:
                if self.bound_run is not None:
                    raise PermissionDeniedError(
                        f"this evaluator only accepts run {self.bound_run!r}"
                    )
                raise PermissionDeniedError(
                    f"this token acts for run {scope.run_id!r} only; leave run_id empty or "
                    "name that run"
                )
            return scope.run_id
        if scope.access is Access.NO_RUN:
            raise PermissionDeniedError(NO_RUN_MESSAGE)
        if scope.access is Access.PRACTICE:
            raise PermissionDeniedError(PRACTICE_MESSAGE)
        run = self.own_run(run_id)
        if scope.access is Access.ANY_RUN and self._runs.known(run):
            raise PermissionDeniedError(
                f"run {run!r} was opened with OpenRun: only the token issued for it acts for it"
            )
        return run

    def visible(self, scope: Scope, run_id: str) -> bool:
        """Whether a caller may see a job or session of ``run_id`` ("" for run-less sessions)."""
        if scope.access is Access.TRUSTED:
            return True
        if scope.access is Access.RUN:
            return run_id == scope.run_id
        if scope.access is Access.ANY_RUN:
            return not self._runs.known(run_id)
        if scope.access is Access.PRACTICE:
            return run_id == ""
        return False  # NO_RUN: opens nothing, sees nothing

    def closed(self, run_id: str) -> bool:
        """Whether ``run_id`` was opened with OpenRun, or is this evaluator's bound run, and
        has been closed since (CloseRun)."""
        if run_id and run_id == self.bound_run:
            return self._bound_closed
        opened = self._runs.get(run_id) if run_id else None
        return opened is not None and not opened.open

    def submission_root(self, run: str, rel_path: str = "") -> Path | None:
        """Where the run's SubmitBatchEval paths start (``run`` already checked).

        A run opened with OpenRun submits from its own ``VOLUME/<run_id>/`` only, so
        no run can snapshot another's files; other runs (an evaluator bound to one
        run, the single-tenant mode) from the volume root, but never from inside a
        directory of a run opened with OpenRun.
        """
        opened = self._runs.get(run)
        if opened is not None:
            return opened.submission_dir
        first = next((p for p in PurePosixPath(rel_path).parts if p != "."), "")
        if first and self._runs.known(first):
            raise PermissionDeniedError(
                f"{first!r} is the submission directory of another run; submit your own files"
            )
        return self._volume
