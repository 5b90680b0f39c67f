"""The job store: every query once, run on SQLite or PostgreSQL by a dialect.

What each method promises is in :mod:`.ports`; what differs between the engines
(placeholders, the clock, row locks, transactions, faults) is the dialect's
(:mod:`.dialect`; :class:`.sqlite.SqliteJobStore`, :class:`.postgresql.PostgresJobStore`
pick one). How the rules hold when several processes write at once:

* A claim takes the oldest queued row (``FOR UPDATE SKIP LOCKED`` on PostgreSQL:
  replicas claiming at once skip each other's row instead of waiting for it, and a
  row claimed meanwhile fails the re-checked ``state``) and marks it RUNNING in the
  same statement: each job goes to one process.
* A run's next ``eval_seq`` is read and used under the run's event lock
  (:meth:`.dialect.Dialect.lock_events`), held until the commit: the next writer
  reads ``MAX(eval_seq)`` after it, so there is no gap and no duplicate;
  ``PRIMARY KEY (run_id, eval_seq)`` is the backstop. With ``held_job`` the job
  row is read ``FOR SHARE`` first, so a cancellation or a takeover cannot commit
  between the check and the insert.
* :meth:`SqlJobStore.requeue_expired` takes the expired rows ``SKIP LOCKED`` (a row
  being renewed or claimed right now is left for the next pass, a third of a lease
  later); :meth:`SqlJobStore.cancel_run` locks the run's rows ``FOR UPDATE``
  (waiting for a claim or an event in flight). Both lock in ``seq`` order, so they
  cannot deadlock each other.
* A practice charge is one statement: the upsert's row lock serializes the
  replicas charging a run, and its ``WHERE`` is checked on the newest count.
* Every other conditional write is one statement whose ``WHERE`` says who may win
  (``owner = :owner``, ``state = 'RUNNING'``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, ClassVar

from ale_robotics.evaluator.store import migrations
from ale_robotics.evaluator.store.base import (
    REQUEUED_REASON,
    EventMaker,
    ExpiredLeases,
    JobRecord,
    RunRecord,
    check_job_id,
    check_token_sha256,
    new_job_id,
    new_owner_id,
)
from ale_robotics.evaluator.store.dialect import Dialect, Tx
from ale_robotics.evaluator.store.identity import StoreIdentity, bind_identity
from ale_robotics.evaluator.store.orphans import ExpiredJob, fail_orphaned
from ale_robotics.evaluator.store.ports import JobStore
from ale_robotics.model.states import TERMINAL_STATES, FailureSource, JobState

__all__ = ["SqlJobStore"]

log = logging.getLogger(__name__)

# The states are written into the SQL as literals (as the partial indexes are).
assert all(s.value == s.name for s in JobState)
_TERMINAL = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL_STATES))

_JOB_COLUMNS = (
    "job_id", "run_id", "task_id", "client_token", "state", "episodes_done", "episodes_total",
    "failure_source", "failure_reason", "heartbeat", "created", "updated", "attempts",
    "files_json", "result_json", "owner", "lease_until",
)  # fmt: skip
_JOBS = ", ".join(_JOB_COLUMNS)
"""The ``jobs`` columns every job query selects, in the order :func:`_job` reads."""
_SELECT_JOBS = f"SELECT {_JOBS} FROM jobs"
_RUNS = "run_id, task_id, token_sha256, submission_dir, opened_unix, closed_unix"
"""The ``runs`` columns, in :class:`.base.RunRecord`'s order."""
_INFRA = FailureSource.INFRASTRUCTURE.value


def _job(row: tuple[Any, ...] | None) -> JobRecord | None:
    if row is None:
        return None
    fields = dict(zip(_JOB_COLUMNS, row, strict=True))
    fields["files"] = json.loads(fields.pop("files_json"))
    return JobRecord.model_validate(fields)


def _run(row: tuple[Any, ...] | None) -> RunRecord | None:
    if row is None:
        return None
    run_id, task_id, digest, submission_dir, opened, closed = row
    return RunRecord(
        str(run_id), str(task_id), str(digest), str(submission_dir), float(opened), float(closed)
    )


class SqlJobStore(JobStore):
    """A job store on the database a :class:`.dialect.Dialect` connects to; thread-safe.

    ``owner`` is the evaluator process this store acts for (default: a new
    :func:`.base.new_owner_id`) and ``lease_s`` how long its claims last unrenewed.
    Opening creates or migrates the schema (:mod:`.migrations`).
    """

    SCHEMA_VERSION: ClassVar[int] = migrations.SCHEMA_VERSION

    def __init__(self, dialect: Dialect, *, owner: str | None, lease_s: float) -> None:
        if lease_s <= 0:
            raise ValueError(f"lease_s must be positive, got {lease_s}")
        self.owner = owner or new_owner_id()
        self.lease_s = lease_s
        self.dialect = dialect
        try:
            dialect.open(self.owner, lease_s)
            applied = dialect.run(lambda tx: migrations.migrate(tx, dialect))
        except BaseException:
            dialect.close()
            raise
        for version in applied:
            log.info("job store %s: schema version %d applied", dialect.where, version)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dialect.where!r}, owner={self.owner!r})"

    def close(self) -> None:
        self.dialect.close()

    def _read(self, sql: str, **params: object) -> tuple[Any, ...] | None:
        """The first row of one read."""
        return self.dialect.run(lambda tx: tx.one(sql, **params), tx=False)

    def _value(self, sql: str, **params: object) -> Any:
        """The one value of one read (an aggregate)."""
        return self.dialect.run(lambda tx: tx.scalar(sql, **params), tx=False)

    def _changed(self, sql: str, **params: object) -> bool:
        """One conditional write (atomic alone); whether it changed a row."""
        return self.dialect.run(lambda tx: tx.changed(sql, **params), tx=False) == 1

    def schema_version(self) -> int:
        return int(self._value("SELECT MAX(version) FROM schema_version"))

    def bind_identity(self, mine: StoreIdentity) -> StoreIdentity:
        return self.dialect.run(lambda tx: bind_identity(tx, mine))

    # ------------------------------------------------------------------ reads --

    def get(self, job_id: str) -> JobRecord | None:
        return _job(self._read(f"{_SELECT_JOBS} WHERE job_id = :job_id", job_id=job_id))

    def by_token(self, run_id: str, client_token: str) -> JobRecord | None:
        return _job(
            self._read(
                f"{_SELECT_JOBS} WHERE run_id = :run_id AND client_token = :token",
                run_id=run_id,
                token=client_token,
            )
        )

    def latest_for_run(self, run_id: str) -> JobRecord | None:
        sql = f"{_SELECT_JOBS} WHERE run_id = :run_id ORDER BY seq DESC LIMIT 1"
        return _job(self._read(sql, run_id=run_id))

    def count_for_run(self, run_id: str) -> int:
        sql = "SELECT COUNT(*) FROM jobs WHERE run_id = :run_id AND failure_source != :infra"
        return int(self._value(sql, run_id=run_id, infra=_INFRA))

    def quota_used(self, run_id: str, free_infra_failures: int) -> int:
        row = self._read(
            "SELECT COUNT(*) FILTER (WHERE failure_source != :infra), "
            "COUNT(*) FILTER (WHERE failure_source = :infra) FROM jobs WHERE run_id = :run_id",
            run_id=run_id,
            infra=_INFRA,
        )
        assert row is not None
        return int(row[0]) + max(0, int(row[1]) - free_infra_failures)

    def retries_used(self, run_id: str) -> int:
        return int(
            self._value(
                "SELECT COALESCE(SUM(CASE WHEN attempts > 1 THEN attempts - 1 ELSE 0 END), 0) "
                "FROM jobs WHERE run_id = :run_id",
                run_id=run_id,
            )
        )

    def queue_position(self, job_id: str, *, same_run: bool = False) -> int:
        scope = " AND q.run_id = j.run_id" if same_run else ""
        row = self._read(
            "SELECT CASE WHEN j.state = 'QUEUED' THEN 1 + (SELECT COUNT(*) FROM jobs q "
            f"WHERE q.state = 'QUEUED' AND q.seq < j.seq{scope}) ELSE 0 END FROM jobs j "
            "WHERE j.job_id = :job_id",
            job_id=job_id,
        )
        return 0 if row is None else int(row[0])

    def holds(self, job_id: str) -> bool:
        sql = "SELECT 1 FROM jobs WHERE job_id = :job_id AND state = 'RUNNING' AND owner = :owner"
        return self._read(sql, job_id=job_id, owner=self.owner) is not None

    def events(self, run_id: str) -> list[str]:
        sql = "SELECT event_json FROM events WHERE run_id = :run_id ORDER BY eval_seq"
        rows = self.dialect.run(lambda tx: tx.all(sql, run_id=run_id), tx=False)
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------ transitions --

    def create(
        self,
        *,
        run_id: str,
        task_id: str,
        client_token: str,
        episodes_total: int,
        files: dict[str, str],
        state: JobState = JobState.QUEUED,
        failure_reason: str = "",
        job_id: str | None = None,
    ) -> tuple[JobRecord, bool]:
        job_id = new_job_id() if job_id is None else check_job_id(job_id)
        source = FailureSource.SUBMISSION if state is JobState.REJECTED else FailureSource.NONE
        running = state is JobState.RUNNING
        # held from the start (an eval session's row): heartbeat now, lease from now
        heartbeat, lease = (":now", ":now + :lease_s") if running else ("0", "0")
        params = {"run_id": run_id, "token": client_token}

        def insert(tx: Tx) -> tuple[JobRecord | None, bool]:
            row = tx.one(
                "INSERT INTO jobs (job_id, run_id, task_id, client_token, state, "
                "episodes_total, failure_source, failure_reason, created, updated, files_json, "
                "heartbeat, owner, lease_until) VALUES (:job_id, :run_id, :task_id, :token, "
                f":state, :total, :source, :reason, :now, :now, :files, {heartbeat}, :owner, "
                f"{lease}) ON CONFLICT DO NOTHING RETURNING {_JOBS}",
                **params,
                job_id=job_id,
                task_id=task_id,
                state=state.value,
                total=episodes_total,
                source=source.value,
                reason=failure_reason,
                files=json.dumps(files, sort_keys=True),
                owner=self.owner if running else "",
                lease_s=self.lease_s,
            )
            if row is not None:
                return _job(row), False
            sql = f"{_SELECT_JOBS} WHERE run_id = :run_id AND client_token = :token"
            return _job(tx.one(sql, **params)), True

        job, dedup = self.dialect.run(insert)
        if job is None:  # the conflict was on the id, not the token: another job has it
            raise ValueError(f"job_id {job_id!r} is taken by another job")
        return job, dedup

    def claim_next(self, *, run_id: str | None = None) -> JobRecord | None:
        scope = "" if run_id is None else " AND run_id = :run_id"
        returning = ", ".join(f"jobs.{c}" for c in _JOB_COLUMNS)
        sql = (
            f"WITH next AS (SELECT seq FROM jobs WHERE state = 'QUEUED'{scope} "
            f"ORDER BY seq LIMIT 1{self.dialect.skip_locked}) "
            "UPDATE jobs SET state = 'RUNNING', owner = :owner, lease_until = :now + :lease_s, "
            "attempts = attempts + 1, heartbeat = :now, updated = :now, episodes_done = 0 "
            f"FROM next WHERE jobs.seq = next.seq RETURNING {returning}"
        )
        row = self.dialect.run(
            lambda tx: tx.one(sql, run_id=run_id, owner=self.owner, lease_s=self.lease_s)
        )
        return _job(row)

    def renew(self) -> set[str]:
        sql = (
            "UPDATE jobs SET lease_until = :now + :lease_s, heartbeat = :now "
            "WHERE owner = :owner AND state = 'RUNNING' RETURNING job_id"
        )
        rows = self.dialect.run(lambda tx: tx.all(sql, owner=self.owner, lease_s=self.lease_s))
        return {str(r[0]) for r in rows}

    def progress(self, job_id: str, episodes_done: int) -> bool:
        return self._changed(
            "UPDATE jobs SET episodes_done = :done, heartbeat = :now, updated = :now, "
            "lease_until = :now + :lease_s "
            "WHERE job_id = :job_id AND state = 'RUNNING' AND owner = :owner",
            done=episodes_done,
            lease_s=self.lease_s,
            job_id=job_id,
            owner=self.owner,
        )

    def heartbeat(self, job_id: str) -> bool:
        return self._changed(
            "UPDATE jobs SET heartbeat = :now, lease_until = :now + :lease_s "
            "WHERE job_id = :job_id AND state = 'RUNNING' AND owner = :owner",
            lease_s=self.lease_s,
            job_id=job_id,
            owner=self.owner,
        )

    def finish(
        self,
        job_id: str,
        state: JobState,
        *,
        owned: bool = False,
        failure_source: FailureSource = FailureSource.NONE,
        failure_reason: str = "",
        result_json: str | None = None,
        episodes_done: int | None = None,
    ) -> bool:
        if state not in TERMINAL_STATES:
            raise ValueError(f"{state} is not terminal")
        cond = "state = 'RUNNING' AND owner = :owner" if owned else f"state NOT IN ({_TERMINAL})"
        return self._changed(
            "UPDATE jobs SET state = :state, failure_source = :source, failure_reason = :reason, "
            "result_json = COALESCE(:result, result_json), "
            "episodes_done = COALESCE(:done, episodes_done), updated = :now, lease_until = 0 "
            f"WHERE job_id = :job_id AND {cond}",
            state=state.value,
            source=failure_source.value,
            reason=failure_reason,
            result=result_json,
            done=episodes_done,
            job_id=job_id,
            owner=self.owner,
        )

    def requeue(self, job_id: str, reason: str) -> bool:
        return self._unclaim(job_id, reason, "attempts")

    def release(self, job_id: str) -> bool:
        return self._unclaim(job_id, None, "CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END")

    def _unclaim(self, job_id: str, reason: str | None, attempts: str) -> bool:
        return self._changed(
            "UPDATE jobs SET state = 'QUEUED', owner = '', lease_until = 0, episodes_done = 0, "
            f"failure_reason = COALESCE(:reason, failure_reason), attempts = {attempts}, "
            "updated = :now WHERE job_id = :job_id AND state = 'RUNNING' AND owner = :owner",
            reason=reason,
            job_id=job_id,
            owner=self.owner,
        )

    def requeue_expired(
        self,
        *,
        run_id: str | None = None,
        fail_tokens: Collection[str] = (),
        fail_reason: str = "",
    ) -> ExpiredLeases:
        scope = "" if run_id is None else " AND run_id = :run_id"

        def reap(tx: Tx) -> ExpiredLeases:
            rows = tx.all(
                "SELECT job_id, client_token FROM jobs WHERE state = 'RUNNING' "
                f"AND lease_until < :now{scope} ORDER BY seq{self.dialect.skip_locked}",
                run_id=run_id,
            )
            failed = [str(job) for job, token in rows if token in fail_tokens]
            requeued = [str(job) for job, token in rows if token not in fail_tokens]
            if failed:
                tx.execute(
                    "UPDATE jobs SET state = 'FAILED', failure_source = :infra, "
                    "failure_reason = :reason, lease_until = 0, updated = :now "
                    "WHERE job_id IN (:ids)",
                    infra=_INFRA,
                    reason=fail_reason,
                    ids=failed,
                )
            if requeued:
                tx.execute(
                    "UPDATE jobs SET state = 'QUEUED', owner = '', lease_until = 0, "
                    "episodes_done = 0, updated = :now, failure_reason = :reason "
                    "WHERE job_id IN (:ids)",
                    reason=REQUEUED_REASON,
                    ids=requeued,
                )
            return ExpiredLeases(requeued, failed)

        return self.dialect.run(reap)

    def fail_orphaned(self, decide: Callable[[ExpiredJob], str | None]) -> list[ExpiredJob]:
        return fail_orphaned(self.dialect, decide)

    def cancel_run(self, run_id: str, reason: str) -> list[str]:
        def cancel(tx: Tx) -> list[str]:
            rows = tx.all(
                "SELECT job_id FROM jobs WHERE run_id = :run_id "
                f"AND state IN ('QUEUED', 'RUNNING') ORDER BY seq{self.dialect.for_update}",
                run_id=run_id,
            )
            ids = [str(r[0]) for r in rows]
            if ids:
                tx.execute(
                    "UPDATE jobs SET state = 'CANCELLED', failure_source = :source, "
                    "failure_reason = :reason, lease_until = 0, updated = :now "
                    "WHERE job_id IN (:ids)",
                    source=FailureSource.NONE.value,
                    reason=reason,
                    ids=ids,
                )
            return ids

        return self.dialect.run(cancel)

    def append_event(
        self,
        run_id: str,
        make: EventMaker,
        *,
        held_job: str | None = None,
        preamble: Sequence[EventMaker] | None = None,
    ) -> bool:
        def append(tx: Tx) -> bool:
            if held_job is not None and not tx.one(
                "SELECT 1 FROM jobs WHERE job_id = :job_id AND state = 'RUNNING' "
                f"AND owner = :owner{self.dialect.for_share}",
                job_id=held_job,
                owner=self.owner,
            ):
                return False
            self.dialect.lock_events(tx, run_id)
            seq = int(
                tx.scalar(
                    "SELECT COALESCE(MAX(eval_seq) + 1, 0) FROM events WHERE run_id = :run_id",
                    run_id=run_id,
                )
            )
            # under the run's lock: "no event yet" holds until this transaction commits
            for maker in [*(preamble or ()), make] if seq == 0 else [make]:
                tx.execute(
                    "INSERT INTO events (run_id, eval_seq, event_json) "
                    "VALUES (:run_id, :seq, :event)",
                    run_id=run_id,
                    seq=seq,
                    event=maker(seq),
                )
                seq += 1
            return True

        return self.dialect.run(append)

    # ------------------------------------------------------------------ runs --

    def add_run(self, run: RunRecord) -> bool:
        check_token_sha256(run.token_sha256)
        return self._changed(
            f"INSERT INTO runs ({_RUNS}) VALUES (:run_id, :task_id, :digest, :submission_dir, "
            ":opened, :closed) ON CONFLICT (run_id) DO NOTHING",
            run_id=run.run_id,
            task_id=run.task_id,
            digest=run.token_sha256,
            submission_dir=run.submission_dir,
            opened=run.opened_unix,
            closed=run.closed_unix,
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        return _run(self._read(f"SELECT {_RUNS} FROM runs WHERE run_id = :run_id", run_id=run_id))

    def open_run_by_token(self, token_sha256: str) -> RunRecord | None:
        sql = f"SELECT {_RUNS} FROM runs WHERE token_sha256 = :digest AND closed_unix = 0"
        return _run(self._read(sql, digest=token_sha256))

    def revoke_run(self, run_id: str) -> RunRecord | None:
        def revoke(tx: Tx) -> RunRecord | None:
            tx.execute(
                "UPDATE runs SET closed_unix = :now WHERE run_id = :run_id AND closed_unix = 0",
                run_id=run_id,
            )
            return _run(tx.one(f"SELECT {_RUNS} FROM runs WHERE run_id = :run_id", run_id=run_id))

        return self.dialect.run(revoke)

    # -------------------------------------------------------- practice steps --

    def practice_steps(self, run_id: str) -> int:
        sql = "SELECT agent_steps FROM practice_steps WHERE run_id = :run_id"
        row = self._read(sql, run_id=run_id)
        return 0 if row is None else int(row[0])

    def charge_practice_steps(self, run_id: str, n: int, *, limit: int | None) -> tuple[bool, int]:
        if n < 0:
            raise ValueError(f"cannot charge a negative number of practice steps ({n})")
        if limit is not None and n > limit:  # past it whatever the count: nothing to write
            return False, self.practice_steps(run_id)
        cond = "" if limit is None else " WHERE p.agent_steps + :n <= :limit"
        # one statement: the upsert's row lock serializes replicas charging the run,
        # and the WHERE is checked on the newest count
        sql = (
            "INSERT INTO practice_steps AS p (run_id, agent_steps) VALUES (:run_id, :n) "
            f"ON CONFLICT (run_id) DO UPDATE SET agent_steps = p.agent_steps + :n{cond} "
            "RETURNING agent_steps"
        )
        row = self.dialect.run(
            lambda tx: tx.one(sql, run_id=run_id, n=n, limit=limit), tx=False, durable=False
        )
        if row is None:  # refused: the count that refused it (or a later one)
            return False, self.practice_steps(run_id)
        return True, int(row[0])
