"""Executors: where a job's shards of episodes run (:class:`Executor`).

* ``local`` (default): spawned, limited, isolated worker processes on this host
  (:class:`LocalExecutor`, :mod:`.local`; what runs inside a worker and how it is
  spawned: :mod:`.worker_process`).
* ``ray``: Ray tasks, on a local Ray instance or an existing cluster
  (``ale_robotics.evaluator.execution.ray.RayExecutor``; Ray is imported only there and
  in :mod:`.ray_connection`, this process's connection to Ray).

:func:`make_executor` builds one by name. Results are bit-identical across executors:
the shard layout is fixed by the task config and every executor runs
:func:`run_shard` on each shard (:mod:`.base`).

The names below are loaded on first use (PEP 562): importing :mod:`.blas`, which is read
before numpy loads, must not import the executors (and numpy with them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.evaluator.execution.base import (
        Executor,
        ExecutorUnavailable,
        RolloutAborted,
        WorkerCrashed,
        WorkerLimits,
        run_shard,
        shard_layout,
    )
    from ale_robotics.evaluator.execution.factory import (
        EXECUTOR_KINDS,
        check_executor,
        make_executor,
    )
    from ale_robotics.evaluator.execution.local import LocalExecutor

__all__ = [
    "EXECUTOR_KINDS",
    "Executor",
    "ExecutorUnavailable",
    "LocalExecutor",
    "RolloutAborted",
    "WorkerCrashed",
    "WorkerLimits",
    "check_executor",
    "make_executor",
    "run_shard",
    "shard_layout",
]

_BASE = "ale_robotics.evaluator.execution.base"
_FACTORY = "ale_robotics.evaluator.execution.factory"
_WHERE = {
    **{name: _BASE for name in ("Executor", "ExecutorUnavailable", "RolloutAborted")},
    **{name: _BASE for name in ("WorkerCrashed", "WorkerLimits", "run_shard", "shard_layout")},
    **{name: _FACTORY for name in ("EXECUTOR_KINDS", "check_executor", "make_executor")},
    "LocalExecutor": "ale_robotics.evaluator.execution.local",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
