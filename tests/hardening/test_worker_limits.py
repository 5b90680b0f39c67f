"""Rollout workers: resource limits, no network, deadlines, and crashes as infrastructure.

A worker that dies or fails must never be scored as the agent's failure: the job
is retried and, the inputs being frozen, succeeds with the same metrics, or ends
FAILED with failure_source infrastructure after max_attempts; never REJECTED.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import (
    RUN,
    TASK_ID,
    agent,
    official,
    stable_weights,
    wait,
    write_policy,
)
from helpers import random_weights

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.execution.base import WorkerLimits
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.tasks import Registry, TaskSpec


@contextlib.contextmanager
def _evaluator(tmp: Path, registry: Registry, **config: object) -> Iterator[RunningEvaluator]:
    volume = tmp / "vol"
    volume.mkdir(exist_ok=True)
    ev = serve(
        EvaluatorConfig(
            tmp / "state",
            volume,
            task_id=TASK_ID,
            run_id=RUN,
            workers=1,
            max_submissions_per_run=100,
            **config,  # type: ignore[arg-type]
        ),
        agent_listen=f"unix://{tmp}/a.sock",
        harness_listen=f"unix://{tmp}/h.sock",
        registry=registry,
    )
    try:
        yield ev
    finally:
        ev.stop(grace=0.5)


def _kill_workers_once_running(ev: RunningEvaluator, job: str) -> list[int]:
    """SIGKILL the rollout workers as soon as the job is RUNNING and they exist."""
    deadline = time.monotonic() + 30
    with agent(ev) as c:
        while time.monotonic() < deadline:
            pids = ev.evaluator.pool.worker_pids()
            if pids and c.status(job).state == "RUNNING":
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                return pids
            time.sleep(0.005)
    raise AssertionError("the job never ran")


def test_limits_are_applied_in_workers(task: TaskSpec) -> None:
    limits = WorkerLimits(
        address_space_bytes=3 * 1024**3,
        cpu_seconds_per_shard=1234,
        file_size_bytes=8 * 1024**2,
        max_new_processes=50,
    )
    pool = LocalExecutor(1, limits)
    try:
        pool.run(task, random_weights(task), [1, 2, 3])
        assert pool.run_in_worker(resource.getrlimit, resource.RLIMIT_AS) == (3 * 1024**3,) * 2
        assert pool.run_in_worker(resource.getrlimit, resource.RLIMIT_FSIZE) == (8 * 1024**2,) * 2
        nproc = pool.run_in_worker(resource.getrlimit, resource.RLIMIT_NPROC)[0]
        if pool.run_in_worker(os.getuid) == 65534:  # own user namespace: own count
            assert nproc == 51  # 1 thread at start + 50
        else:
            assert 50 < nproc < 100_000
        # the CPU limit is re-armed per shard: usage so far + 1234 s (+1 for rounding)
        cpu_soft = pool.run_in_worker(resource.getrlimit, resource.RLIMIT_CPU)[0]
        assert 1234 < cpu_soft <= 1234 + 60
        (pid,) = pool.worker_pids()
        limits_text = Path(f"/proc/{pid}/limits").read_text()
        assert "Max address space         3221225472" in limits_text
    finally:
        pool.shutdown()


def test_worker_has_no_network(task: TaskSpec) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    pool = LocalExecutor(1)
    try:
        if pool.run_in_worker(os.getuid) != 65534:
            pytest.skip(
                "this kernel refuses unprivileged user namespaces; workers keep the network"
            )
        with pytest.raises(OSError):
            pool.run_in_worker(socket.create_connection, ("127.0.0.1", port), 2)
        # and isolation changes no result
        isolated = pool.run(task, random_weights(task), [5, 6, 7])
    finally:
        pool.shutdown()
        listener.close()
    plain = LocalExecutor(1, WorkerLimits(isolate_network=False))
    try:
        assert plain.run(task, random_weights(task), [5, 6, 7]) == isolated
    finally:
        plain.shutdown()


def test_tiny_deadline_times_out_and_service_goes_on(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    with _evaluator(short_tmp, registry, job_deadline_s=0.2) as ev:
        write_policy(short_tmp / "vol", stable_weights(task))
        with agent(ev) as c:
            st = wait(c, c.submit(client_token="slow"))
            assert st.state == "TIMED_OUT"
            assert st.failure_source == "infrastructure"
            assert "job deadline" in st.failure_reason
            assert ev.evaluator.pool.worker_pids() == []  # the timed-out workers were killed
            ev.evaluator.config.job_deadline_s = 120.0
            assert wait(c, c.submit(client_token="fast")).state == "SUCCEEDED"


def test_killed_worker_is_retried_and_gives_the_same_metrics(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    with _evaluator(short_tmp, registry, max_attempts=3) as ev:
        write_policy(short_tmp / "vol", stable_weights(task))
        with agent(ev) as c:
            job = c.submit(client_token="crash")
            killed = _kill_workers_once_running(ev, job)
            st = wait(c, job)
            clean = c.submit(client_token="clean")
            assert wait(c, clean).state == "SUCCEEDED"
        assert st.state == "SUCCEEDED", st
        retried = official(ev.harness_address, ev.harness_token, job)
        baseline = official(ev.harness_address, ev.harness_token, clean)
        assert not set(killed) & set(ev.evaluator.pool.worker_pids())
    assert retried.attempts == 2 and baseline.attempts == 1
    assert retried.metrics == baseline.metrics
    assert [e.model_dump() for e in retried.episodes] == [e.model_dump() for e in baseline.episodes]


def test_worker_killed_every_attempt_ends_failed_infrastructure(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    with _evaluator(short_tmp, registry, max_attempts=2) as ev:
        write_policy(short_tmp / "vol", stable_weights(task))
        with agent(ev) as c:
            job = c.submit(client_token="doomed")
            first = _kill_workers_once_running(ev, job)
            deadline = time.monotonic() + 30
            while not set(ev.evaluator.pool.worker_pids()) - set(first):
                assert time.monotonic() < deadline
                time.sleep(0.005)
            _kill_workers_once_running(ev, job)
            st = wait(c, job)
            assert st.state == "FAILED"
            assert st.failure_source == "infrastructure"
            assert "after 2 attempts" in st.failure_reason
            # an infrastructure failure does not use up the run's quota
            assert ev.evaluator.store.count_for_run(RUN) == 0


def test_memory_limit_breach_is_infrastructure_not_rejection(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    """A worker that cannot allocate (64 MiB address space) fails every attempt."""
    limits = WorkerLimits(address_space_bytes=64 * 1024**2)
    with _evaluator(short_tmp, registry, max_attempts=2, worker_limits=limits) as ev:
        write_policy(short_tmp / "vol", random_weights(task))
        with agent(ev) as c:
            st = wait(c, c.submit(client_token="oom"))
        assert st.state == "FAILED", st
        assert st.failure_source == "infrastructure"
        assert "worker" in st.failure_reason
        res = official(ev.harness_address, ev.harness_token, st.job_id)
        assert res.attempts == 2
