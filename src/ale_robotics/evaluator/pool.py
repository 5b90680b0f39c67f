"""Compatibility names: the local process pool is now :mod:`.execution.local`.

``RolloutPool`` is :class:`~.execution.local.LocalExecutor`; the errors and
:class:`~.execution.base.WorkerLimits` live in :mod:`.execution.base`. New code
imports from :mod:`ale_robotics.evaluator.execution`.
"""

from __future__ import annotations

from ale_robotics.evaluator.execution.base import RolloutAborted, WorkerCrashed, WorkerLimits
from ale_robotics.evaluator.execution.local import LocalExecutor, RolloutPool

__all__ = ["LocalExecutor", "RolloutAborted", "RolloutPool", "WorkerCrashed", "WorkerLimits"]
