"""The local executor's start-up: workers started ahead of a job, warm, and importing little.

``LocalExecutor.prestart`` starts the processes a job of a task will use and has each
one import the task's rollout kind and build one of its envs, so that the first shard
does not pay for it; nothing about the results may change. A worker imports what its
shards need and nothing of the command line, the plots or the signing keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from execution_helpers import stable_weights, with_layout

from ale_robotics.evaluator.execution import LocalExecutor, WorkerLimits
from ale_robotics.tasks import Registry, TaskSpec

_NO_LIMITS = WorkerLimits(None, None, None, None, False)
_MODULES = "sorted(__import__('sys').modules)"
"""Evaluated in a worker (``eval`` pickles by name): the modules it has imported."""

NOT_IN_A_WORKER = (
    "typer",
    "rich",
    "click",
    "matplotlib",
    "cryptography",
    "grpc",
    "ale_robotics.cli",
)
"""The command line, the plots, the trajectory's signing and gRPC: the parent's business only."""


@pytest.fixture
def executor() -> Iterator[LocalExecutor]:
    ex = LocalExecutor(2, _NO_LIMITS)
    try:
        yield ex
    finally:
        ex.shutdown()


def _wait_for_workers(ex: LocalExecutor, n: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = ex.worker_pids()
        if len(pids) >= n:
            return pids
        time.sleep(0.01)
    raise AssertionError(f"{n} workers never started (have {ex.worker_pids()})")


def _each_workers(ex: LocalExecutor, n: int, expr: str) -> dict[int, Any]:
    """``expr`` evaluated in each of ``n`` idle workers: ``n`` calls at once, each holding
    its worker for a moment so that no worker takes two."""
    probe = f"(__import__('time').sleep(0.5), __import__('os').getpid(), {expr})[1:]"
    with ThreadPoolExecutor(n) as threads:
        answers = list(threads.map(lambda _: ex.run_in_worker(eval, probe), range(n)))
    return dict(answers)


@pytest.fixture
def two_shards(task: TaskSpec) -> TaskSpec:
    """The task cut into two shards (of 5 of its 10 episodes)."""
    assert task.eval.episodes == 10
    return with_layout(task, 5)


def test_prestart_starts_one_warm_worker_per_shard_before_any_job(
    executor: LocalExecutor, two_shards: TaskSpec
) -> None:
    task = two_shards
    assert executor.worker_pids() == []
    assert executor.prestart(task) == 2
    pids = _wait_for_workers(executor, 2)
    # Every worker ran the warm-up in its initializer, before taking any task: the
    # simulator and the kind are imported, and MuJoCo has no OpenGL backend.
    seen = _each_workers(executor, 2, f"({_MODULES}, __import__('os').environ['MUJOCO_GL'])")
    assert sorted(seen) == sorted(pids)
    for answer in seen.values():
        mods: list[str] = answer[0]
        gl: str = answer[1]
        assert gl == "disable"
        assert "mujoco" in mods
        assert "gymnasium.envs.mujoco.inverted_pendulum_v5" in mods
        assert f"ale_robotics.rollouts.{task.eval.rollout}" in mods
        assert not [m for m in mods if m.split(".")[0] in NOT_IN_A_WORKER], "imports too much"
        assert not [m for m in mods if m.startswith("ale_robotics.cli")]


def test_prestart_is_a_no_op_on_a_running_pool_and_for_an_interactive_task(
    executor: LocalExecutor, task: TaskSpec, registry: Registry
) -> None:
    interactive = registry.get("td3-hopper-v1")
    assert executor.prestart(interactive) == 0
    assert executor.worker_pids() == []
    assert executor.prestart(task) > 0
    _wait_for_workers(executor, 1)
    assert executor.prestart(task) == 0  # workers that run are kept as they are


def test_prestart_starts_no_more_workers_than_shards(task: TaskSpec) -> None:
    ex = LocalExecutor(4, _NO_LIMITS)
    try:
        assert ex.prestart(with_layout(task, 10)) == 1
        _wait_for_workers(ex, 1)
        time.sleep(0.5)
        assert len(ex.worker_pids()) == 1
    finally:
        ex.shutdown()


def test_a_job_right_after_prestart_waits_for_the_warm_workers_not_a_cold_one_more(
    task: TaskSpec,
) -> None:
    # While the prestarted worker warms up none is idle: a shard submitted then would
    # make the pool start a second, cold process (it may start up to 2 here).
    one_shard = with_layout(task, 10)
    ex = LocalExecutor(2, _NO_LIMITS)
    try:
        assert ex.prestart(one_shard) == 1
        outcomes = ex.run(one_shard, stable_weights(task), list(range(1, 11)))
        assert len(outcomes) == 10
        assert len(ex.worker_pids()) == 1
    finally:
        ex.shutdown()


def test_warm_workers_give_the_results_of_cold_ones(two_shards: TaskSpec) -> None:
    task = two_shards
    weights = stable_weights(task)
    seeds = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
    cold, warm = LocalExecutor(2, _NO_LIMITS), LocalExecutor(2, _NO_LIMITS)
    try:
        expected = cold.run(task, weights, seeds)
        warm.prestart(task)
        _wait_for_workers(warm, 2)
        assert warm.run(task, weights, seeds) == expected
    finally:
        cold.shutdown()
        warm.shutdown()


def test_a_failed_warm_up_leaves_a_working_pool(executor: LocalExecutor, task: TaskSpec) -> None:
    # An env id no worker can build: the warm-up fails (logged), the pool does not.
    broken = task.model_copy(update={"env": task.env.model_copy(update={"gym_id": "NoSuchEnv-v0"})})
    assert executor.prestart(broken) > 0
    _wait_for_workers(executor, 1)
    assert executor.run_in_worker(eval, "1 + 1") == 2
    assert executor.run(task, stable_weights(task), [1, 2])[0].length > 0


def test_a_worker_never_runs_the_parents_main_script(tmp_path: Path) -> None:
    """A parent whose main module is a file (the ``ale-robotics`` console script) made
    every spawned worker run it again, importing the whole command line there, unless
    the CLI names its main module (``main_is_the_package``, called by ``main()``)."""
    script = tmp_path / "console_script.py"
    script.write_text(
        "import json, sys\n"
        "from ale_robotics.cli.main import main_is_the_package  # as the console script\n"
        "from ale_robotics.evaluator.execution import LocalExecutor, WorkerLimits\n"
        "if __name__ == '__main__':\n"
        "    if sys.argv[1] == 'named':\n"
        "        main_is_the_package()\n"
        "    ex = LocalExecutor(1, WorkerLimits(None, None, None, None, False))\n"
        "    try:\n"
        f"        print(json.dumps(ex.run_in_worker(eval, {_MODULES!r})))\n"
        "    finally:\n"
        "        ex.shutdown()\n"
    )

    def worker_modules(how: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, str(script), how], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        mods: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
        return mods

    assert "ale_robotics.cli.main" in worker_modules("file")  # what the fix is for
    named = worker_modules("named")
    assert not [m for m in named if m.split(".")[0] in NOT_IN_A_WORKER]
    assert not [m for m in named if m.startswith("ale_robotics.cli")]
