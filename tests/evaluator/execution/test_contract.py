"""The executor contract, run against every executor (local processes, Ray).

Each case ends with the executor still usable: a short run afterwards gives the
reference outcomes again (a crashed or killed worker is replaced).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from execution_helpers import overflow_weights, stable_weights, with_layout
from helpers import random_weights

from ale_robotics.evaluator.execution import (
    Executor,
    RolloutAborted,
    WorkerCrashed,
    run_shard,
    shard_layout,
)
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.tasks import TaskSpec

SEEDS = list(range(100, 110))


def _reference(task: TaskSpec, weights, seeds, indices=None) -> list[EpisodeOutcome]:
    """The shards computed one after another in this process."""
    task_json = task.model_dump_json()
    out = [o for s in shard_layout(task, seeds, indices) for o in run_shard(task_json, weights, s)]
    return sorted(out, key=lambda o: o.index)


def _still_works(executor: Executor, task: TaskSpec) -> None:
    w = random_weights(task, seed=5, scale=0.3)
    assert executor.run(task, w, SEEDS[:4]) == _reference(task, w, SEEDS[:4])


def _long(task: TaskSpec) -> tuple[TaskSpec, dict, list[int]]:
    """8 shards of 10 full-length (1000-step) episodes: about 0.3 s a shard."""
    return with_layout(task, 10), stable_weights(task), list(range(80))


def _all_shards_s(executor: Executor, long: TaskSpec, w: dict, seeds: list[int]) -> float:
    """How long ``seeds`` would take this executor on this host, from one shard measured
    now: the run a stop must cut short (a bound that scales with the host's pace)."""
    t0 = time.monotonic()
    executor.run(long, w, seeds[:10])  # one shard of 10 episodes
    return (time.monotonic() - t0) * (len(seeds) / 10)


def test_outcomes_match_the_shards_run_in_process(executor: Executor, task: TaskSpec) -> None:
    w = random_weights(task, seed=2, scale=0.3)
    got = executor.run(task, w, SEEDS)
    assert got == _reference(task, w, SEEDS)
    assert [o.index for o in got] == list(range(10))
    assert executor.run(task, w, SEEDS) == got  # deterministic on a warm executor
    # a subset of the base seeds, by index (a replay task's hidden subset)
    subset = executor.run(task, w, [105, 101, 109], indices=[5, 1, 9])
    assert subset == _reference(task, w, [105, 101, 109], [5, 1, 9])
    assert [o.index for o in subset] == [1, 5, 9]
    assert executor.run(task, w, []) == []


def test_each_job_is_run_with_its_own_weights_on_warm_workers(
    executor: Executor, task: TaskSpec
) -> None:
    """Workers that keep a job's weights for the next (the local executor's, by digest)
    never serve one job's weights to another: falling, balancing, falling, balancing."""
    falling, balancing = random_weights(task, seed=11, scale=0.3), stable_weights(task)
    seeds = SEEDS[:4]
    expected = [_reference(task, w, seeds) for w in (falling, balancing)]
    assert {o.length for o in expected[0]} != {o.length for o in expected[1]}
    for w, want in zip((falling, balancing, falling, balancing), expected * 2, strict=True):
        assert executor.run(task, w, seeds) == want


def test_progress_and_heartbeats_are_reported(executor: Executor, task: TaskSpec) -> None:
    long, w, seeds = _long(task)
    seen: list[int] = []
    beats: list[float] = []
    out = executor.run(
        long, w, seeds * 2, on_progress=seen.append, on_heartbeat=lambda: beats.append(1.0)
    )
    assert len(out) == 160 and all(o.length == 1000 for o in out)
    assert seen and seen == sorted(seen) and seen[-1] == 160
    assert len(seen) > 2  # as episodes finish, not only at the end
    assert beats  # the run takes a few seconds, a heartbeat a second


def test_deadline_raises_timeout_and_stops_the_workers(executor: Executor, task: TaskSpec) -> None:
    long, w, seeds = _long(task)
    full_s = _all_shards_s(executor, long, w, seeds * 16)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        executor.run(long, w, seeds * 16, deadline=t0 + 0.5)
    # all 128 shards take about 40 s of a worker here (measured: full_s): stopped at the
    # deadline, not after them, on a fast host or a busy one alike
    assert time.monotonic() - t0 < full_s / 4, f"128 shards: {full_s:.0f} s of a worker"
    _still_works(executor, task)


def test_abort_stops_the_run(executor: Executor, task: TaskSpec) -> None:
    long, w, seeds = _long(task)
    full_s = _all_shards_s(executor, long, w, seeds * 16)
    abort = threading.Event()
    timer = threading.Timer(0.5, abort.set)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(RolloutAborted):
            executor.run(long, w, seeds * 16, abort=abort)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < full_s / 4  # as above: well before the shards would end
    _still_works(executor, task)


def test_a_killed_worker_is_worker_crashed(executor: Executor, task: TaskSpec) -> None:
    long, w, seeds = _long(task)
    killed: set[int] = set()
    over = threading.Event()

    def kill_workers() -> None:
        # every worker as soon as it is listed, until the run ends: a warm executor lists
        # idle workers of earlier runs too, and a fresh Ray worker shows once it started
        while not over.wait(0.01):
            for pid in set(executor.worker_pids()) - killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)

    killer = threading.Thread(target=kill_workers)
    killer.start()
    try:
        with pytest.raises(WorkerCrashed):
            executor.run(long, w, seeds * 4)
    finally:
        over.set()
        killer.join()
    # a worker killed just before the run ended may take a moment to exit (a loaded host)
    deadline = time.monotonic() + 10
    while killed & set(executor.worker_pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert killed and not killed & set(executor.worker_pids())
    _still_works(executor, task)


def test_policy_fault_passes_through_first_in_index_order(
    executor: Executor, task: TaskSpec
) -> None:
    """Every shard faults at step 1; the fault reported is episode 0's, the first shard's."""
    with pytest.raises(PolicyFault, match="in episode 0 at step 1") as info:
        executor.run(task, overflow_weights(task), SEEDS)
    assert type(info.value) is PolicyFault  # the fault itself, not a wrapper
    _still_works(executor, task)


def test_workers_and_limits_are_visible(executor: Executor) -> None:
    assert executor.workers == 2
    assert executor.limits.cpu_seconds_per_shard == 1800
    assert executor.kind in ("local", "ray")
