"""A rollout kind's ``worker_needs`` reach the local executor's workers (JAX under RLIMIT_AS)."""

from __future__ import annotations

import functools
import resource

from ale_robotics.evaluator.execution import LocalExecutor
from ale_robotics.evaluator.execution.base import WorkerLimits
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks import TaskSpec, default_registry

GIB = 1 << 30


def _as_kind(task: TaskSpec, kind: str) -> TaskSpec:
    return task.model_copy(update={"eval": task.eval.model_copy(update={"rollout": kind})})


# Pickled by name into the worker, so a function of the library, not of this test module
# (the workers cannot import the tests).
_AS = functools.partial(resource.getrlimit, resource.RLIMIT_AS)
_FSIZE = functools.partial(resource.getrlimit, resource.RLIMIT_FSIZE)


def _limits(ex: LocalExecutor, profile: tuple[WorkerLimits, int]) -> tuple[int, int]:
    pool = ex._get(profile)[0]
    return pool.submit(_AS).result(60)[0], pool.submit(_FSIZE).result(60)[0]


def test_an_mjx_task_gets_workers_without_the_address_space_cap() -> None:
    needs = get_kind("mjx").worker_needs
    assert needs is not None and needs.unlimited_address_space and needs.max_workers == 1
    cheetah = default_registry().get("td3-halfcheetah-vec-v1")
    ex = LocalExecutor(2, WorkerLimits(address_space_bytes=4 * GIB, isolate_network=False))
    try:
        mjx_profile = ex._profile(_as_kind(cheetah, "mjx"))
        native_profile = ex._profile(cheetah)
        assert mjx_profile[1] == 1 and native_profile[1] == 2
        mjx_as, mjx_fsize = _limits(ex, mjx_profile)
        native_as, native_fsize = _limits(ex, native_profile)
        assert mjx_as == resource.RLIM_INFINITY  # XLA reserves far more than it touches
        assert native_as == 4 * GIB  # the other kinds keep the cap, on the same executor
        assert mjx_fsize == native_fsize != resource.RLIM_INFINITY  # the rest still applies
        assert len(ex.worker_pids()) == 2  # one pool per profile, both listed
    finally:
        ex.shutdown()
    assert ex.worker_pids() == []


def test_ray_runs_an_mjx_tasks_shards_one_at_a_time() -> None:
    """The Ray executor keeps a kind's ``max_workers``: the shards in flight are capped."""
    import pytest

    pytest.importorskip("ray")
    from ale_robotics.evaluator.execution.ray import shards_in_flight

    cheetah = default_registry().get("td3-halfcheetah-vec-v1")
    assert shards_in_flight(_as_kind(cheetah, "mjx"), 8) == 1
    assert shards_in_flight(cheetah, 8) == 8  # the other kinds: every CPU
    assert shards_in_flight(_as_kind(cheetah, "gymnasium"), 3) == 3
