"""Jobs nobody can take over: RUNNING rows whose lease ran out and whose run no evaluator
will ever serve again.

The lease model (:mod:`.ports`) requeues an expired job for an evaluator that may run it:
any shared evaluator for a run opened with OpenRun, the restarted ``evaluator serve
--run-id`` for its run. An evaluator embedded in ``ale-robotics run`` is the only one
that ever serves its run, and it dies with its harness: after a ``kill -9`` of the
harness its job used to stay RUNNING for good. :func:`fail_orphaned` ends such rows
FAILED (infrastructure) with the reason its caller gives, in one transaction; the caller
(:class:`ale_robotics.evaluator.batch.leases.LeaseReaper`) decides, row by row, from
what it can check (the run open in the store, the owner's process gone).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ale_robotics.evaluator.store.dialect import Dialect, Tx
from ale_robotics.model.states import FailureSource

__all__ = ["ExpiredJob", "fail_orphaned"]


@dataclass(frozen=True)
class ExpiredJob:
    """A RUNNING job whose lease ran out, as :func:`fail_orphaned` shows it to its caller."""

    job_id: str
    run_id: str
    client_token: str
    owner: str
    """The evaluator process that held it (``host:pid:random``, :func:`.base.new_owner_id`)."""
    run_open: bool
    """Its run is open in the store (OpenRun): every shared evaluator may serve it."""


def fail_orphaned(dialect: Dialect, decide: Callable[[ExpiredJob], str | None]) -> list[ExpiredJob]:
    """End FAILED (infrastructure, ``decide``'s reason) the expired RUNNING jobs ``decide``
    gives a reason for (None: leave it to the lease reaper); the jobs ended.

    Rows being renewed or claimed right now are skipped (``SKIP LOCKED``), and the update
    re-checks that each is still RUNNING with an expired lease: a job its owner renewed
    meanwhile is never touched.
    """

    def reap(tx: Tx) -> list[ExpiredJob]:
        rows = tx.all(
            "SELECT job_id, run_id, client_token, owner FROM jobs WHERE state = 'RUNNING' "
            f"AND lease_until < :now ORDER BY seq{dialect.skip_locked}"
        )
        if not rows:
            return []
        runs = sorted({str(r[1]) for r in rows})
        open_runs = {
            str(r[0])
            for r in tx.all(
                "SELECT run_id FROM runs WHERE run_id IN (:ids) AND closed_unix = 0", ids=runs
            )
        }
        ended = []
        for job_id, run_id, token, owner in rows:
            job = ExpiredJob(str(job_id), str(run_id), str(token), str(owner), run_id in open_runs)
            reason = decide(job)
            if reason is not None and tx.changed(
                "UPDATE jobs SET state = 'FAILED', failure_source = :infra, "
                "failure_reason = :reason, lease_until = 0, updated = :now "
                "WHERE job_id = :job_id AND state = 'RUNNING' AND lease_until < :now",
                infra=FailureSource.INFRASTRUCTURE.value,
                reason=reason,
                job_id=job.job_id,
            ):
                ended.append(job)
        return ended

    return dialect.run(reap)
