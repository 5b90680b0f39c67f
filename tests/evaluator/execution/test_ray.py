"""The Ray executor: results bit-identical to the local executor's, and Ray's own cases
(a shard's time limit, a node with other package versions, an address, Ray missing)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from execution_helpers import OBJECT_STORE_BYTES, stable_weights, with_layout
from helpers import random_weights

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator import EvaluatorConfig
from ale_robotics.evaluator.batch.plan import episode_plan
from ale_robotics.evaluator.execution import (
    Executor,
    ExecutorUnavailable,
    LocalExecutor,
    WorkerCrashed,
    make_executor,
)
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import Registry

SECRET = b"\x07" * 32


@pytest.mark.parametrize(
    ("task_id", "scale"),
    [("td3-inverted-pendulum-v1", 0.3), ("td3-halfcheetah-vec-v1", 0.2)],
)
def test_bit_identical_to_the_local_executor(
    task_id: str,
    scale: float,
    registry: Registry,
    local_executor: Executor,
    ray_executor: Executor,
) -> None:
    """A job's episodes (its hidden seeds, the task's own layout) on both executors."""
    task = registry.get(task_id)
    weights = random_weights(task, seed=11, scale=scale)
    runs = episode_plan(task, derive_seeds(task.eval.base_seeds, "run-ray-1", SECRET))
    seeds, indices = [s for _, s in runs], [i for i, _ in runs]
    local = local_executor.run(task, weights, seeds, indices=indices)
    ray = ray_executor.run(task, weights, seeds, indices=indices)
    assert len(local) == task.eval.episodes
    # dataclass equality: every return, length and flag exactly equal (floats bit for bit)
    assert ray == local
    assert [o.ret.hex() for o in ray] == [o.ret.hex() for o in local]


@pytest.fixture
def ray_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process joining the module's local instance (token authentication, as every local
    instance) by its address needs RAY_AUTH_MODE=token, as an operator's would."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")


@pytest.mark.usefixtures("ray_token")
def test_a_shard_past_its_time_limit_is_worker_crashed(task, ray_executor: Executor) -> None:
    from ale_robotics.evaluator.execution.ray import RayExecutor

    assert isinstance(ray_executor, RayExecutor)
    # a second driver, on the first one's local instance
    strict = RayExecutor(2, shard_timeout_s=0.1, address=ray_executor.cluster_address)
    try:
        with pytest.raises(WorkerCrashed, match=r"time limit of 0\.1s"):
            # one shard of 400 full-length episodes: over 2 s even on the native kind
            strict.run(with_layout(task, 400), stable_weights(task), list(range(400)))
    finally:
        strict.shutdown()
    assert ray_executor.run(task, random_weights(task), [1, 2]) != []  # Ray still up


def test_a_worker_with_other_package_versions_is_worker_crashed(
    task, ray_executor: Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ray_executor.cluster_address  # the driver is up: the stack it reported is set
    stack = {**ray_executor._stack, "mujoco": "0.0.1"}  # type: ignore[attr-defined]
    monkeypatch.setattr(ray_executor, "_stack", stack)
    with pytest.raises(WorkerCrashed, match=r"different software stack: mujoco \S+ \(evaluator: "):
        ray_executor.run(task, random_weights(task), [1, 2, 3])


def test_a_worker_whose_cpu_picks_another_blas_kernel_is_worker_crashed(
    task, ray_executor: Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An AVX2 node's actions differ in their last bits from an AVX-512 node's: refused, not
    mixed into one result."""
    assert ray_executor.cluster_address  # the driver is up: the stack it reported is set
    stack = ray_executor._stack  # type: ignore[attr-defined]
    assert stack["numpy-blas"].split()[0] in ("openblas", "mkl", "blis")
    monkeypatch.setattr(ray_executor, "_stack", {**stack, "numpy-blas": "openblas 0.3.31 Haswell"})
    with pytest.raises(WorkerCrashed, match=r"numpy-blas .* \(evaluator: openblas 0.3.31 Haswell"):
        ray_executor.run(task, random_weights(task), [1, 2, 3])


@pytest.mark.usefixtures("ray_token")
def test_connects_to_a_running_cluster_by_address(task, ray_executor: Executor) -> None:
    """Another process joins this module's Ray instance by its address (as an evaluator
    joins a cluster with --ray-address) and computes the same episodes; its own SIGTERM
    handler (the harness's, ``evaluator serve``'s) survives, and Ray never loads in it (its
    driver is a process of its own)."""
    address = ray_executor.cluster_address  # type: ignore[attr-defined]
    weights = random_weights(task, seed=4, scale=0.3)
    script = textwrap.dedent(
        f"""
        import json
        from dataclasses import asdict
        import numpy as np
        from ale_robotics.evaluator.execution import make_executor
        from ale_robotics.tasks import default_registry
        task = default_registry().get({task.id!r})
        rng = np.random.default_rng(4)
        w = {{r.key: (rng.standard_normal(r.shape) * 0.3).astype(r.dtype)
             for r in task.contract.tensors}}
        import signal
        def mine(*_):
            pass
        signal.signal(signal.SIGTERM, mine)
        ex = make_executor("ray", ray_address={address!r})
        assert signal.getsignal(signal.SIGTERM) is mine, "ray.init took over SIGTERM"
        try:
            out = ex.run(task, w, list(range(100, 110)))
            import sys
            assert "ray" not in sys.modules, "Ray was imported in the evaluator's process"
            print(json.dumps({{"workers": ex.workers, "out": [asdict(o) for o in out]}}))
        finally:
            ex.shutdown()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["workers"] == 2  # the cluster's CPUs
    mine = ray_executor.run(task, weights, list(range(100, 110)))
    assert doc["out"] == [asdict(o) for o in mine]


def test_an_unreachable_address_fails_fast() -> None:
    from ale_robotics.evaluator.execution.ray_connection import check_reachable

    with pytest.raises(ExecutorUnavailable, match=r"cannot reach the Ray cluster at 127.0.0.1:1"):
        check_reachable("127.0.0.1:1")


@pytest.mark.usefixtures("ray_token")
def test_two_executors_in_one_process_have_a_driver_each(ray_executor: Executor) -> None:
    """No "one Ray connection per process" any more: each executor's driver is its own."""
    from ale_robotics.evaluator.execution.ray import RayExecutor

    assert isinstance(ray_executor, RayExecutor)
    other = RayExecutor(1, address=ray_executor.cluster_address)
    try:
        assert other.driver_pid() not in (None, ray_executor.driver_pid(), os.getpid())
    finally:
        other.shutdown()
    assert other.driver_pid() is None


def test_without_ray_installed_the_error_names_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" raises ImportError
    monkeypatch.delitem(sys.modules, "ale_robotics.evaluator.execution.ray")
    with pytest.raises(ExecutorUnavailable, match=r"needs Ray: pip install 'ray==2\.60\.0'"):
        make_executor("ray")
    assert make_executor("local", workers=1).kind == "local"  # the local one needs no Ray


def test_executor_names_are_checked(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown executor 'spark'"):
        make_executor("spark")
    with pytest.raises(InvalidArgumentError, match="goes with the ray executor"):
        make_executor("local", ray_address="10.0.0.1:6379")
    with pytest.raises(InvalidArgumentError, match="unknown executor"):
        EvaluatorConfig(tmp_path, None, executor="spark")
    cfg = EvaluatorConfig(tmp_path, None, executor="ray", ray_address="10.0.0.1:6379")
    assert (cfg.executor, cfg.ray_address) == ("ray", "10.0.0.1:6379")


def _tree(pid: int) -> set[int]:
    """``pid``'s descendants (from /proc)."""
    from helpers import child_pids

    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in child_pids(todo.pop()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


@pytest.mark.parametrize("how", ["SIGKILL", "shutdown"])
def test_a_private_instance_dies_with_its_evaluator(how: str) -> None:
    """No raylet, GCS or Ray worker outlives the evaluator: killed with SIGKILL (the driver
    sees itself re-parented and exits; Ray's fate sharing takes the instance's processes),
    or shut down."""
    from ale_robotics.evaluator.execution.ray import alive

    script = textwrap.dedent(
        f"""
        import sys, time
        from ale_robotics.evaluator.execution.ray import RayExecutor
        from ale_robotics.tasks import default_registry
        task = default_registry().get("td3-inverted-pendulum-v1")
        ex = RayExecutor(1, object_store_bytes=100 * 1024**2)
        w = {{r.key: __import__("numpy").zeros(r.shape, r.dtype) for r in task.contract.tensors}}
        ex.run(task, w, [1, 2])
        print("ready", flush=True)
        if {how!r} == "shutdown":
            sys.stdin.readline()
            ex.shutdown()
        else:
            time.sleep(600)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        tree = _tree(proc.pid)
        names = [Path(f"/proc/{p}/cmdline").read_bytes() for p in tree if alive(p)]
        assert any(b"raylet" in n for n in names) and any(b"gcs_server" in n for n in names)
        if how == "SIGKILL":
            proc.kill()
        else:
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while {p for p in tree if alive(p)} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not {p for p in tree if alive(p)}, "Ray processes outlived the evaluator"
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def test_a_prestarted_executor_runs_its_first_shards_on_the_warmed_workers(
    registry: Registry,
) -> None:
    """The executor returns before its private Ray instance is up, and prestart warms as many
    Ray workers as the job runs shards at once, in the background; the job waits for it,
    then its shards run on those very workers, with the results a cold executor gives."""
    from ale_robotics.evaluator.execution.ray import RayExecutor

    task = with_layout(registry.get("td3-inverted-pendulum-v1"), 2)
    weights = random_weights(task, seed=3, scale=0.3)
    ex = RayExecutor(2, object_store_bytes=OBJECT_STORE_BYTES)
    try:
        # a private instance starts in the background (seconds): not yet up when made
        assert ex._driver is None and ex._first is not None
        assert ex.prestart(task) == 2
        with ex._run_lock:  # held by the warm-up until it is done
            warmed = set(ex.worker_pids())
        assert len(warmed) == 2, f"two workers warmed up, got {warmed}"
        out = ex.run(task, weights, [5, 6, 7, 8])
        assert set(ex.worker_pids()) == warmed, "the shards ran on other workers than the warm"
    finally:
        ex.shutdown()
    with LocalExecutor(2) as local:
        assert out == local.run(task, weights, [5, 6, 7, 8])


@pytest.mark.usefixtures("ray_token")
def test_a_warm_up_the_cluster_cannot_place_gives_up_and_the_cluster_still_serves(
    task, ray_executor: Executor
) -> None:
    """Three warm-ups on a 2-CPU cluster: two start and wait for the third, which never gets a
    CPU. The driver's wait ends (here after 1 s: it must stay well inside the 60 s after which
    the evaluator counts a silent driver lost), nothing is reported warm, and the cluster
    serves the next job."""
    address = ray_executor.cluster_address  # type: ignore[attr-defined]
    script = textwrap.dedent(
        f"""
        import json, time
        from ale_robotics.evaluator.execution import ray_shards
        from ale_robotics.evaluator.execution.ray_connection import connect, disconnect
        from ale_robotics.tasks import default_registry
        pinned = connect({address!r}, 2, {OBJECT_STORE_BYTES})
        ray_shards._WARM_WAIT_S = 1.0
        run = ray_shards.ShardRun(pinned)
        t0 = time.monotonic()
        got = run.warm(default_registry().get({task.id!r}).model_dump_json(), 3)
        print(json.dumps({{"got": got, "s": time.monotonic() - t0}}))
        run.lose_board()
        disconnect()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    # the wait ended, inside the 60 s after which the evaluator counts a silent driver lost
    assert doc["got"] == [] and doc["s"] < 60, doc
    weights = random_weights(task, seed=5, scale=0.3)
    t0 = time.monotonic()
    assert len(ray_executor.run(task, weights, list(range(4)))) == 4
    assert time.monotonic() - t0 < 60, "the given-up warm-ups still held the cluster's CPUs"
