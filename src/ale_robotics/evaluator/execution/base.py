"""The executor interface: run a task's shards of episodes somewhere, get the outcomes back.

::

    Executor                       run(task, weights, seeds, ...) -> [EpisodeOutcome]
    ├── LocalExecutor  (local.py)  spawned worker processes on this host (the default)
    └── RayExecutor    (ray.py)    Ray tasks on a local Ray instance or a cluster

    errors an executor raises
    ├── WorkerCrashed       infrastructure: a worker died or failed (the runner retries the job)
    ├── RolloutAborted      the caller set ``abort`` (a cancelled job, a stopping evaluator)
    ├── TimeoutError        past ``deadline``
    └── PolicyFault         the submission's policy output a NaN or inf (passed through unchanged)

Every executor computes the same thing: the episodes are cut into shards of
``eval.envs_per_shard`` in index order (:func:`shard_layout`, a layout fixed by the
task config), and each shard is :func:`run_shard` on the same inputs, in whatever
process the executor picks. Batched matmul may round differently for different
batch sizes, so the fixed layout is what makes a result independent of the
executor and of its worker count: results are bit-identical across executors.
"""

from __future__ import annotations

import abc
import functools
import importlib.metadata
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.execution.blas import numpy_blas
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "Executor",
    "ExecutorUnavailable",
    "Heartbeat",
    "Progress",
    "RolloutAborted",
    "Shard",
    "StackMismatch",
    "WorkerCrashed",
    "WorkerLimits",
    "run_shard",
    "shard_layout",
    "stack_mismatch",
    "stack_versions",
]

Progress = Callable[[int], None]
"""Called with the number of episodes done so far (non-decreasing, ends at the total)."""
Heartbeat = Callable[[], None]
"""Called about once a second while the executor is waiting on live workers."""
Shard = list[tuple[int, int]]
"""One shard: (episode index, env seed) per episode, in index order."""


class WorkerCrashed(Exception):
    """A worker process died: an infrastructure failure, never the submission's fault."""


class RolloutAborted(Exception):
    """The caller set ``abort``: the rollouts were stopped, no failure of anyone's."""


class ExecutorUnavailable(FailedPreconditionError):
    """An executor that cannot start here: its package is missing, or its cluster is
    unreachable. The message says what to install or check."""


@dataclass(frozen=True)
class WorkerLimits:
    """Resource limits every rollout worker applies to itself when it starts.

    ``None`` leaves a limit as inherited. The defaults are roomy for the MuJoCo
    tasks (a worker peaks near 0.4 GiB of address space and 0.1 GiB resident)
    and exist to stop runaways, not to meter normal work:

    * ``address_space_bytes`` (``RLIMIT_AS``, default 4 GiB): allocations past it
      fail with ``MemoryError`` inside the worker instead of swapping the host.
    * ``cpu_seconds_per_shard`` (``RLIMIT_CPU`` soft limit, default 1800 s): re-armed
      at the start of every shard, since workers outlive jobs; past it the kernel
      sends ``SIGXCPU`` and the worker dies. The wall-clock job deadline
      (``TIMED_OUT``) is separate and usually hits first.
    * ``file_size_bytes`` (``RLIMIT_FSIZE``, default 16 MiB): workers write no files
      (at most MuJoCo's warning log); Python ignores ``SIGXFSZ``, so a larger write
      fails with ``EFBIG``.
    * ``max_new_processes`` (``RLIMIT_NPROC``, default 64): processes and threads a
      worker may add. In the worker's own user namespace (``isolate_network``) the
      kernel counts only the worker's tasks, so the limit is the worker's thread
      count plus this; without it the count is per user, so the limit becomes the
      user's current task count plus this (stops a fork bomb without breaking a
      busy account). Linux does not enforce it for root.
    * ``isolate_network`` (default on): ``unshare(CLONE_NEWUSER | CLONE_NEWNET)``, so
      a worker has no network interface at all, not even the host's loopback.
      Where the kernel refuses (user namespaces disabled, a seccomp profile), the
      worker logs a warning and runs with the host network.

    These are the local executor's process limits. Ray workers are Ray's processes
    (multi-threaded, on Ray's network), so the Ray executor maps what it can onto
    Ray's own means instead (see :mod:`.ray`).
    """

    address_space_bytes: int | None = 4 * 1024**3
    cpu_seconds_per_shard: int | None = 1800
    file_size_bytes: int | None = 16 * 1024**2
    max_new_processes: int | None = 64
    isolate_network: bool = True


def shard_layout(
    task: TaskSpec, seeds: Sequence[int], indices: Sequence[int] | None = None
) -> list[Shard]:
    """The episodes cut into shards of ``eval.envs_per_shard``, in index order.

    ``indices`` are the episodes' positions in the task's base-seed list when only
    some of them run (a replay task's hidden subset); by default 0..n-1.
    """
    size = task.eval.envs_per_shard
    if indices is None:
        indexed = list(enumerate(int(s) for s in seeds))
    else:
        indexed = [(int(i), int(s)) for i, s in zip(indices, seeds, strict=True)]
    return [indexed[i : i + size] for i in range(0, len(indexed), size)]


@functools.lru_cache(maxsize=8)
def _task(task_json: str) -> TaskSpec:
    """The task of a shard: a job's shards carry the same JSON, and parsing it cost ~0.2 ms a
    shard (frozen models, so one instance serves them all)."""
    return TaskSpec.model_validate_json(task_json)


def run_shard(
    task_json: str,
    weights: dict[str, npt.NDArray[np.floating]],
    seeds: Shard,
    report: Callable[[], None] | None = None,
) -> list[EpisodeOutcome]:
    """One shard's episodes: the computation every executor runs, wherever it runs it.

    ``report`` is called once per finished episode (progress). The task travels as
    its JSON, so every executor rebuilds the same :class:`TaskSpec` from the same bytes.
    """
    task = _task(task_json)

    def episode_done(_: EpisodeOutcome) -> None:
        if report is not None:
            report()

    return rollout_episodes(task, weights, seeds, episode_done)


def in_index_order(per_shard: Sequence[Sequence[EpisodeOutcome]]) -> list[EpisodeOutcome]:
    """All shards' outcomes, sorted by episode index."""
    return sorted((o for shard in per_shard for o in shard), key=lambda e: e.index)


_STACK = ("ale-robotics", "numpy", "mujoco", "gymnasium")
"""Distributions whose versions decide an episode's numbers."""


class StackMismatch(RuntimeError):
    """A worker (on another host) runs other versions of the packages that decide the results."""


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    out = []
    for dist in _STACK:
        try:
            out.append((dist, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            out.append((dist, "missing"))
    out.append(("numpy-blas", numpy_blas()))
    return tuple(out)


def stack_versions() -> dict[str, str]:
    """What decides an episode's numbers in this process: the versions of the packages,
    and numpy's BLAS kernel (:func:`numpy_blas`)."""
    return dict(_versions())


def stack_mismatch(expected: dict[str, str]) -> str | None:
    """What differs between ``expected`` (the driver's) and this process's stack, if any."""
    here = stack_versions()
    diff = [
        f"{dist} {here.get(dist, 'missing')} (evaluator: {version})"
        for dist, version in expected.items()
        if here.get(dist) != version
    ]
    if not diff:
        return None
    return (
        f"a worker on {socket.gethostname()} runs a different software stack: "
        + ", ".join(diff)
        + "; install the evaluator's versions on every node (a numpy-blas difference is "
        "the CPU's: run shards on nodes whose CPUs pick the same kernel, or set "
        "OPENBLAS_CORETYPE to one kernel on every node)"
    )


_REDACT = re.compile(r"\d{10,}|[0-9a-fA-F]{16,}")


def redacted(exc: BaseException) -> str:
    """An exception for the log, with long numbers cut out (they could be hidden seeds)."""
    return f"{type(exc).__name__}: {_REDACT.sub('<redacted>', str(exc))[:300]}"


class Executor(abc.ABC):
    """Runs a task's episodes in shards on workers; one instance serves many jobs.

    ``workers`` is how many shards run at once (local: processes; Ray: shards in
    flight). ``limits`` are the worker limits it was built with (applied as
    :class:`WorkerLimits` describes by the local executor, mapped onto Ray's means
    by the Ray executor). Thread-safe for one :meth:`run` at a time per job; the
    evaluator runs one job at a time.
    """

    kind: ClassVar[str]
    """The name ``--executor`` takes: 'local', 'ray'."""
    workers: int
    limits: WorkerLimits
    on_shard: Callable[[float], None] | None = None
    """Called with each shard's seconds on its worker, where the executor measures them
    (the local one does; metrics, :mod:`ale_robotics.evaluator.observe`)."""

    @abc.abstractmethod
    def run(
        self,
        task: TaskSpec,
        weights: dict[str, npt.NDArray[np.floating]],
        seeds: Sequence[int],
        on_progress: Progress | None = None,
        deadline: float | None = None,
        on_heartbeat: Heartbeat | None = None,
        indices: Sequence[int] | None = None,
        abort: threading.Event | None = None,
    ) -> list[EpisodeOutcome]:
        """All episodes, in :func:`shard_layout`, sorted by episode index.

        ``indices``: see :func:`shard_layout`. ``on_progress`` gets the episodes done so
        far as they finish, ``on_heartbeat`` is called about once a second while the
        workers are alive. Raises :class:`WorkerCrashed` when a worker dies or fails
        (an infrastructure failure: the runner retries the job), :class:`TimeoutError`
        past ``deadline`` (a ``time.monotonic()`` value), :class:`PolicyFault`
        unchanged when the policy output a non-finite value (the first failing
        shard's, in index order) and, once ``abort`` is set, stops the workers and
        raises :class:`RolloutAborted` within one poll (50 ms).
        """

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Stop the workers and release what the executor holds; idempotent."""

    def prestart(self, task: TaskSpec) -> int:
        """Start (and warm up for ``task``) the workers a job of it will use, in the
        background, for a caller that knows a job is coming; a job that arrives meanwhile
        waits for them. Returns how many were asked for (0: nothing to do, or the executor
        starts its workers only with a job). Results never depend on it."""
        return 0

    def worker_pids(self) -> list[int]:
        """PIDs of live worker processes on this host, where the executor knows them
        (diagnostics and tests; empty before the first job)."""
        return []

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
