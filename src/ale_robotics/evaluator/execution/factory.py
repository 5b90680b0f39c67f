"""One place that turns an executor's name into an executor (``--executor local|ray``)."""

from __future__ import annotations

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator.execution.base import Executor, WorkerLimits
from ale_robotics.evaluator.execution.local import LocalExecutor

__all__ = ["EXECUTOR_KINDS", "check_executor", "make_executor"]

EXECUTOR_KINDS = ("local", "ray")
"""The names ``--executor`` takes."""


def check_executor(kind: str, ray_address: str | None = None) -> None:
    """Refuse an unknown executor name, or a Ray address given to another executor."""
    if kind not in EXECUTOR_KINDS:
        raise InvalidArgumentError(
            f"unknown executor {kind!r}: use one of {', '.join(EXECUTOR_KINDS)}"
        )
    if ray_address is not None and kind != "ray":
        raise InvalidArgumentError("a Ray address goes with the ray executor (--executor ray)")


def make_executor(
    kind: str = "local",
    *,
    workers: int | None = None,
    limits: WorkerLimits | None = None,
    ray_address: str | None = None,
) -> Executor:
    """The executor ``kind`` with ``workers`` shards at once and ``limits``.

    ``'local'``: spawned processes on this host (:class:`.local.LocalExecutor`).
    ``'ray'``: Ray tasks (:class:`.ray.RayExecutor`): on the cluster at ``ray_address``,
    or on a local Ray instance it starts when that is None. Raises
    :class:`.base.ExecutorUnavailable` when Ray is not installed or unreachable.
    """
    check_executor(kind, ray_address)
    if kind == "ray":
        # Ray is imported only here: the local executor works without it installed.
        from ale_robotics.evaluator.execution.ray import RayExecutor

        return RayExecutor(workers, limits, address=ray_address)
    return LocalExecutor(workers, limits)
