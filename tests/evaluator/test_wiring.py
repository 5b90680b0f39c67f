"""The evaluator's services take their collaborators, never the Evaluator (evaluator/core.py).

Each service is built here by hand, as the composition root builds it, with no
Evaluator anywhere, and works; and in a real Evaluator no service can reach the
Evaluator, nor the hidden-seed secret except through the run ledger.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.batch.jobs import JobService
from ale_robotics.evaluator.batch.leases import LeaseReaper
from ale_robotics.evaluator.batch.runner import JobRunner
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.execution import make_executor
from ale_robotics.evaluator.results.builder import ResultBuilder
from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.registry import RunRegistry
from ale_robotics.evaluator.runs.service import RunService
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.sessions.eval_record import EvalRecords
from ale_robotics.evaluator.sessions.manager import SessionManager
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import SqliteJobStore
from ale_robotics.model.states import JobState
from ale_robotics.seeds import new_secret
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.trajectory import EvaluatorSigner

RUN = "run-wiring-1"


@dataclass
class _Settings:
    """The operator settings the services read (what an EvaluatorConfig has)."""

    job_deadline_s: float = 60.0
    max_attempts: int = 3
    max_infra_retries_per_run: int = 3
    max_submissions_per_run: int | None = 2
    free_infra_failures_per_run: int = 1
    max_sessions: int | None = None
    max_sessions_total: int | None = None


@dataclass
class _Services:
    store: SqliteJobStore
    ledger: RunLedger
    runner: JobRunner
    sessions: SessionManager
    jobs: JobService
    runs: RunService


@pytest.fixture
def services(tmp_path: Path, registry: Registry) -> Iterator[_Services]:
    """Every service, wired by hand with no Evaluator, on a fresh store and volume."""
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    volume = tmp_path / "volume"
    volume.mkdir()
    settings = _Settings()
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    pool = make_executor(workers=1)  # workers start only when a job runs
    ledger = RunLedger(store, EvaluatorSigner.generate(), new_secret())
    runs = RunRegistry(store)
    training = TrainingLedger(store)
    tasks = TaskCatalog(registry)
    access = RunAccess(runs, bound_run=None, submission_volume=volume)
    results = ResultBuilder(tasks, ledger.secret_sha256)
    records = EvalRecords(store, ledger, results, training, tasks)
    reaper = LeaseReaper(store, records, bound_run=None)
    runner = JobRunner(store, pool, ledger, results, tasks.spec, snapshots, reaper.reap, settings)
    sessions = SessionManager(access, records, training, tasks.training_budget, settings)
    jobs = JobService(store, ledger, results, tasks, access, runner, settings, snapshots=snapshots)
    run_service = RunService(runs, access, tasks, ledger, jobs, sessions, submission_volume=volume)
    try:
        yield _Services(store, ledger, runner, sessions, jobs, run_service)
    finally:
        sessions.stop()
        runner.stop()
        pool.shutdown()
        store.close()


def test_the_services_work_without_an_evaluator(services: _Services, task: TaskSpec) -> None:
    # an empty submission breaks the contract: a REJECTED job, signed, without running
    job, dedup = services.jobs.submit(task.id, RUN, "", "first")
    assert not dedup and job.state is JobState.REJECTED
    assert services.jobs.submit(task.id, RUN, "", "first") == (job, True)
    result = services.jobs.result(job.job_id, "")
    assert result.state is JobState.REJECTED and result.failure_source == "submission"
    assert [e["kind"] for e in result.events] == [
        "evaluator_key",
        "seed_commitment",
        "submission_received",
        "validation",
    ]
    assert services.jobs.queue_position(job) == 0
    assert services.runner.reap_expired() == []
    assert services.jobs.cancel_run(RUN) == []  # nothing left unfinished
    opened = services.runs.open_run("run-wiring-2", task.id)
    assert opened.agent_token and services.sessions.count("run-wiring-2") == 0
    closed = services.runs.close_run("run-wiring-2")
    assert (closed.sessions_closed, closed.jobs_cancelled) == (0, 0)


def _reachable(*roots: object, skip: tuple[object, ...] = ()) -> Iterator[object]:
    """Every object reachable from ``roots`` through attributes, containers, bound
    methods and closures; objects in ``skip`` are yielded but not entered."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, str, int, float)):
            continue
        seen.add(id(obj))
        yield obj
        if any(obj is s for s in skip):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
        elif isinstance(obj, types.FunctionType):
            stack.extend(c.cell_contents for c in obj.__closure__ or ())
        else:
            attrs = getattr(obj, "__dict__", None)
            if isinstance(attrs, dict):
                stack.extend(attrs.values())


def test_no_service_reaches_the_evaluator_nor_the_secret(
    tmp_path: Path, registry: Registry
) -> None:
    ev = Evaluator(EvaluatorConfig(tmp_path / "state", None, workers=1), registry)
    try:
        secret = ev.state.secret()
        services = (ev.jobs, ev.sessions, ev.runner, ev.run_service, ev.access, ev.tasks)
        reached = list(_reachable(*services, ev.results, skip=(ev.ledger,)))
        assert any(o is ev.store for o in reached) and any(o is ev.pool for o in reached)
        assert not [o for o in reached if isinstance(o, Evaluator)]
        outside_ledger = list(_reachable(*services, ev.results, skip=(ev.ledger, ev.registry)))
        holders = [
            o
            for o in outside_ledger
            if o is not ev.ledger and ("_secret" in vars(o) if hasattr(o, "__dict__") else False)
        ]
        assert holders == []
        assert not [o for o in outside_ledger if isinstance(o, bytes) and o == secret]
        assert [o for o in _reachable(ev.ledger) if isinstance(o, bytes) and o == secret]
    finally:
        ev.stop()
