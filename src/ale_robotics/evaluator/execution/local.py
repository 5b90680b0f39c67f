"""The local executor: spawned worker processes, limited, isolated, replaced on a crash.

:class:`LocalExecutor` (also importable as ``RolloutPool``, its former name, from
:mod:`ale_robotics.evaluator.pool`) is the default :class:`~.base.Executor`.

BLAS is pinned to one thread per worker, or its threads fight MuJoCo.

Isolation: each worker applies :class:`WorkerLimits` when it starts (address
space, CPU time per shard, file size, process count; by default it also drops
into a fresh network namespace). Workers run only evaluator code on validated
data, so the limits are there to turn a bug or a pathological simulation into a
crashed worker (:class:`~.base.WorkerCrashed`, an infrastructure failure that the
evaluator retries) rather than an exhausted host. Any exception a worker raises
is reported the same way: it can never be the submission's fault, because the
submission was fully validated before it reached a worker. The one exception is
:class:`.pipeline.PolicyFault`, which evaluator code raises on purpose when the
submitted policy outputs a NaN or inf: it is passed on unchanged (the worker is
healthy and stays), for the runner to end the job as the submission's failure.

Stopping: workers ignore SIGINT and SIGTERM. A Ctrl-C in a terminal reaches the
whole foreground process group, workers included (and a service manager's
SIGTERM often the whole control group); left to Python, each worker would print
a ``KeyboardInterrupt`` traceback or die, and the job would look like a crashed
worker before the evaluator even heard of the stop. The parent stops them
instead: :meth:`LocalExecutor.run` given an ``abort`` event that gets set kills its
workers (SIGKILL) within one poll and raises :class:`~.base.RolloutAborted` (a cancelled
job, a stopping evaluator); an idle pool is shut down normally. A worker whose
parent died exits when it next reads from the parent (end of file).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import queue
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.execution.base import (
    Executor,
    Heartbeat,
    Progress,
    RolloutAborted,
    Shard,
    WorkerCrashed,
    WorkerLimits,
    in_index_order,
    redacted,
    run_shard,
    shard_layout,
)
from ale_robotics.evaluator.pipeline import EpisodeOutcome, PolicyFault
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["LocalExecutor", "RolloutPool"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# ----------------------------------------------------------- worker processes --

_PROGRESS: Any = None
_LIMITS: WorkerLimits | None = None
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
"""Signals meant for the evaluator, which workers ignore (see the module docstring)."""
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def _set_limit(which: int, soft: int) -> None:
    """Lower ``which`` to ``soft`` (soft and hard), never above the inherited hard limit.

    A limit the platform refuses is logged, not fatal: failing the initializer
    would break the pool, i.e. every evaluation on this host.
    """
    try:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, soft))
    except (ValueError, OSError) as exc:
        log.warning("rollout worker %d: cannot set rlimit %d: %s", os.getpid(), which, exc)


def _user_tasks(uid: int) -> int:
    """Processes and threads of ``uid`` on this host (what RLIMIT_NPROC counts)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = dict(
                line.split(":", 1) for line in Path(entry.path, "status").read_text().splitlines()
            )
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
    return total


def _arm_cpu_limit(limits: WorkerLimits) -> None:
    """Allow ``cpu_seconds_per_shard`` more CPU seconds from now (soft limit only)."""
    if limits.cpu_seconds_per_shard is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + limits.cpu_seconds_per_shard + 1
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError) as exc:
        log.warning("rollout worker %d: cannot set the CPU limit: %s", os.getpid(), exc)


def _isolate_network() -> bool:
    """Move this process into new user and network namespaces; False if refused."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        log.warning(
            "rollout worker %d keeps the host network: unshare failed (%s)",
            os.getpid(),
            os.strerror(err),
        )
        return False
    return True


def _apply_limits(limits: WorkerLimits) -> None:
    linux = sys.platform.startswith("linux")
    user_tasks = _user_tasks(os.getuid()) if linux else 0  # host view, before unsharing
    isolated = linux and limits.isolate_network and _isolate_network()  # needs 1 thread
    if limits.address_space_bytes is not None:
        _set_limit(resource.RLIMIT_AS, limits.address_space_bytes)
    if limits.file_size_bytes is not None:
        _set_limit(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    if limits.max_new_processes is not None and linux:
        # In its own user namespace the kernel counts only this worker's tasks
        # against RLIMIT_NPROC (per-namespace ucounts, Linux 5.14+); otherwise all
        # of the user's.
        base = len(os.listdir("/proc/self/task")) if isolated else user_tasks
        _set_limit(resource.RLIMIT_NPROC, base + limits.max_new_processes)
    _arm_cpu_limit(limits)


def _init_worker(progress: Any, limits: WorkerLimits | None = None) -> None:
    global _LIMITS, _PROGRESS
    # The parent stops workers (see the module docstring); the signals arrived
    # blocked (:class:`_PinnedSpawnProcess`), so one sent during startup is discarded.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _PROGRESS = progress
    _LIMITS = limits
    if limits is not None:
        _apply_limits(limits)


def _run_shard(
    tag: str,
    task_json: str,
    weights: dict[str, npt.NDArray[np.floating]],
    seeds: Shard,
) -> list[EpisodeOutcome]:
    if _LIMITS is not None:
        _arm_cpu_limit(_LIMITS)

    def report() -> None:
        if _PROGRESS is not None:
            _PROGRESS.put((tag, 1))

    return run_shard(task_json, weights, seeds, report)


_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def _pinned_env() -> Iterator[None]:
    """Set the BLAS/OpenMP thread variables to 1 in ``os.environ`` for a moment.

    A spawned child copies the parent's environment when it starts, and the BLAS
    library reads these variables once, when numpy is imported there.
    """
    with _ENV_LOCK:
        saved = {v: os.environ.get(v) for v in _THREAD_VARS}
        for v in _THREAD_VARS:
            os.environ[v] = "1"
        try:
            yield
        finally:
            for v, old in saved.items():
                if old is None:
                    os.environ.pop(v, None)
                else:
                    os.environ[v] = old


class _PinnedSpawnProcess(SpawnProcess):
    """A spawned process that starts with one BLAS thread and SIGINT, SIGTERM blocked.

    ProcessPoolExecutor starts its workers lazily, inside ``submit``, so the
    environment has to be pinned around each start, not around the pool's
    construction. One thread also keeps the worker single-threaded when its
    initializer runs, which ``unshare(CLONE_NEWUSER)`` requires.

    The signals are blocked in the spawning thread for the moment of the fork: the
    child inherits the mask through ``exec``, so a Ctrl-C while the worker's
    interpreter starts stays pending until :func:`_init_worker` ignores it.
    (Only the main thread may change a handler; any thread may change its mask.)
    """

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with _pinned_env():
            old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                return SpawnProcess._Popen(process_obj)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _PinnedSpawnContext(SpawnContext):
    Process = _PinnedSpawnProcess


class LocalExecutor(Executor):
    """A persistent pool of spawned worker processes, rebuilt if one of them dies.

    Each worker applies ``limits`` (:class:`WorkerLimits`; the defaults when not
    given, ``WorkerLimits(None, None, None, None, False)`` for none).
    """

    kind = "local"

    def __init__(self, workers: int | None = None, limits: WorkerLimits | None = None) -> None:
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self.limits = limits if limits is not None else WorkerLimits()
        self._ctx = _PinnedSpawnContext()
        self._pool: ProcessPoolExecutor | None = None
        self._progress: Any = None
        self._lock = threading.Lock()

    def _get(self) -> tuple[ProcessPoolExecutor, Any]:
        with self._lock:
            if self._pool is None:
                self._progress = self._ctx.Queue()
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=self._ctx,
                    initializer=_init_worker,
                    initargs=(self._progress, self.limits),
                )
            return self._pool, self._progress

    def _discard(self) -> None:
        """Drop the pool and kill its processes (a timed-out shard must not keep running).

        No future is cancelled: the executor's manager thread marks every pending
        one broken once it sees the workers gone, and on Python 3.11 it dies with
        an ``InvalidStateError`` traceback (and leaks the pool's semaphores) when
        one of them was cancelled first."""
        with self._lock:
            if self._pool is not None:
                # ProcessPoolExecutor only gains terminate_workers() in Python 3.14.
                procs = list(getattr(self._pool, "_processes", {}).values())
                for proc in procs:
                    proc.kill()  # they ignore SIGTERM
                self._pool.shutdown(wait=False)
            self._pool = None

    def worker_pids(self) -> list[int]:
        """PIDs of the live worker processes (empty before the first job)."""
        with self._lock:
            if self._pool is None:
                return []
            procs = list(getattr(self._pool, "_processes", {}).values())
        return [p.pid for p in procs if p.pid is not None and p.is_alive()]

    def run_in_worker(self, fn: Callable[..., T], *args: Any, timeout: float = 60.0) -> T:
        """Run a picklable callable in a worker and return its result.

        A diagnostic hook (what does a worker see, which limits apply?) for
        operators and tests; rollouts go through :meth:`run`.
        """
        pool, _ = self._get()
        return pool.submit(fn, *args).result(timeout=timeout)

    def shutdown(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

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
        """See :meth:`.base.Executor.run`; the shards go to the worker processes."""
        pool, progress = self._get()
        shards = shard_layout(task, seeds, indices)
        total = sum(len(shard) for shard in shards)
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        task_json = task.model_dump_json()
        try:
            futures: list[Future[list[EpisodeOutcome]]] = [
                pool.submit(_run_shard, tag, task_json, weights, shard) for shard in shards
            ]
        except BrokenProcessPool as exc:
            self._discard()
            raise WorkerCrashed(f"worker pool broken: {exc}") from None
        done = 0
        pending = set(futures)
        beat = time.monotonic()
        while True:
            _, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            if on_heartbeat is not None and time.monotonic() - beat > 1.0:
                beat = time.monotonic()
                on_heartbeat()
            try:
                while True:
                    msg_tag, n = progress.get_nowait()
                    if msg_tag == tag:
                        done += n
                        if on_progress is not None:
                            on_progress(done)
            except queue.Empty:
                pass
            if not pending:
                break
            if abort is not None and abort.is_set():
                self._discard()
                raise RolloutAborted("the rollouts were stopped")
            if deadline is not None and time.monotonic() > deadline:
                self._discard()
                raise TimeoutError("evaluation deadline passed")
        per_shard: list[list[EpisodeOutcome]] = []
        for f in futures:
            try:
                per_shard.append(f.result())
            except BrokenProcessPool as exc:
                self._discard()
                raise WorkerCrashed(f"a worker process died: {exc}") from None
            except PolicyFault:
                raise  # the submission's failure, detected on purpose; the workers are fine
            except Exception as exc:
                # MemoryError past the address-space limit, EFBIG, a simulator error:
                # never the (validated) submission's fault. Only the type is reported,
                # the message may mention values a status must not show.
                log.error("rollout worker failed: %s", redacted(exc))
                self._discard()
                raise WorkerCrashed(f"a worker process failed ({type(exc).__name__})") from None
        if on_progress is not None and done != total:
            on_progress(total)
        return in_index_order(per_shard)


RolloutPool = LocalExecutor
"""The local executor's former name (``ale_robotics.evaluator.pool.RolloutPool``)."""
