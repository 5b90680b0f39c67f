"""Executors: where a job's shards of episodes run (:class:`Executor`).

* ``local`` (default): spawned, limited, isolated worker processes on this host
  (:class:`LocalExecutor`).
* ``ray``: Ray tasks, on a local Ray instance or an existing cluster
  (``ale_robotics.evaluator.execution.ray.RayExecutor``; Ray is imported only there).

:func:`make_executor` builds one by name. Results are bit-identical across executors:
the shard layout is fixed by the task config and every executor runs
:func:`run_shard` on each shard (:mod:`.base`).
"""

from ale_robotics.evaluator.execution.base import (
    Executor,
    ExecutorUnavailable,
    RolloutAborted,
    WorkerCrashed,
    WorkerLimits,
    run_shard,
    shard_layout,
)
from ale_robotics.evaluator.execution.factory import EXECUTOR_KINDS, check_executor, make_executor
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
