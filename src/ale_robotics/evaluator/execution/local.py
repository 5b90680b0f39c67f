"""The local executor: spawned worker processes, limited, isolated, replaced on a crash.

:class:`LocalExecutor` is the default :class:`~.base.Executor`.

BLAS is pinned to one thread per worker, or its threads fight MuJoCo.

Starting: a spawned worker takes a few tenths of a second before it can run a
shard (the interpreter, numpy, the task model, the rollout kind, the simulator
and one env of the task). Started by the first job, that time is the job's; the
harness calls :meth:`LocalExecutor.prestart` while its agent starts instead, so
the workers are up and warm when the submission arrives (:func:`_warm_up`).
Workers never render, so they start with ``MUJOCO_GL=disable``. A worker imports
only what its shards need: the evaluator's worker-side modules, never the command
line that may have started the evaluator (see ``ale_robotics.cli.main``).

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

import atexit
import contextlib
import ctypes
import dataclasses
import logging
import math
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
from ale_robotics.evaluator.execution.blas import worker_blas_env
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks.spec import TaskMode, TaskSpec

__all__ = ["LocalExecutor"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# ----------------------------------------------------------- worker processes --

_PROGRESS: Any = None
_LIMITS: WorkerLimits | None = None
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
"""Signals meant for the evaluator, which workers ignore (see the module docstring)."""
PRESTART_WAIT_S = 60.0
"""The longest a job waits for the workers :meth:`LocalExecutor.prestart` is starting."""
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
    """Move this process into new user and network namespaces; False if refused.

    ``unshare`` is looked up in the symbols the interpreter already has loaded (its
    libc), not through ``ctypes.util.find_library("c")``, which runs ``ldconfig -p``
    in a subprocess: a fork and an exec in every worker's start-up, for the same
    library.
    """
    libc = ctypes.CDLL(None, use_errno=True)
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


def _no_gl() -> None:
    """Start MuJoCo without an OpenGL backend: workers never render.

    ``import mujoco`` otherwise loads one (glfw by default, whose import runs a
    Python subprocess to check the library's version: 40-80 ms). Gymnasium's MuJoCo
    envs still import glfw when one is built (their renderer's module does), so a
    kind that builds them pays that once per worker, in the warm-up. Only effective
    before mujoco is imported; nothing a worker imports before its initializer does.
    """
    if "mujoco" not in sys.modules:
        os.environ["MUJOCO_GL"] = "disable"


def _warm_up(task_json: str) -> None:
    """Do now what a worker's first shard of this task would do first: import the task's
    rollout kind (and, through it, the simulator) and build one env of a MuJoCo task.

    The env is closed again (the kinds keep their own caches); what stays is the
    imported modules, the loaded libraries and the files in the page cache, which
    is most of a cold first shard. Best effort: a failure is logged and the first
    shard starts cold, as it would have without the warm-up (and fails there,
    where it is reported, if something is really wrong).
    """
    try:
        task = TaskSpec.model_validate_json(task_json)
        get_kind(task.eval.rollout)
        if task.simulator.name == "mujoco":
            # Here, not at the top: ale_robotics.envs imports Gymnasium, which the
            # evaluator process (this module's other importer) does not need.
            from ale_robotics.envs.make import make_env

            make_env(task.env).close()
    except Exception as exc:  # never the pool's failure: the shard reports the real one
        log.warning("rollout worker %d: warm-up failed: %s", os.getpid(), redacted(exc))


def _init_worker(
    progress: Any, limits: WorkerLimits | None = None, warm_task_json: str | None = None
) -> None:
    global _LIMITS, _PROGRESS
    # The parent stops workers (see the module docstring); the signals arrived
    # blocked (:class:`_PinnedSpawnProcess`), so one sent during startup is discarded.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _PROGRESS = progress
    _LIMITS = limits
    _no_gl()
    if limits is not None:
        _apply_limits(limits)
    if warm_task_json is not None:
        _warm_up(warm_task_json)


def _started() -> int:
    """A no-op task: submitting one makes the pool start a worker (see ``prestart``)."""
    return os.getpid()


def _start_workers(pool: ProcessPoolExecutor, n: int, up: threading.Event) -> None:
    """Make ``pool`` start ``n`` processes (it starts one per submission while none is
    idle) and set ``up`` once they all answered, or could not start."""
    try:
        started = [pool.submit(_started) for _ in range(n)]
        wait(started)
    except (BrokenProcessPool, RuntimeError) as exc:  # broken or shut down meanwhile
        log.info("rollout workers not started ahead of the job: %s", exc)
    finally:
        up.set()


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
    """Set the BLAS/OpenMP thread variables to 1, and the OpenBLAS kernel
    (:func:`~ale_robotics.evaluator.execution.blas.worker_blas_env`), in ``os.environ`` for a
    moment.

    A spawned child copies the parent's environment when it starts, and the BLAS
    library reads these variables once, when numpy is imported there.
    """
    pinned = {v: "1" for v in _THREAD_VARS} | worker_blas_env()
    with _ENV_LOCK:
        saved = {v: os.environ.get(v) for v in pinned}
        os.environ.update(pinned)
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

    def _bootstrap(self, parent_sentinel: Any = None) -> int:
        """Run the worker (in the child), then exit without tearing the interpreter down.

        A spawned child ends in ``sys.exit``, and the interpreter's finalization then
        frees every module and object one by one (the simulator, numpy, the task
        model, a kind's cached envs): about a tenth of a second per worker that
        :meth:`LocalExecutor.shutdown` waits for, and with it the evaluator's stop
        and the run that stops it, for nothing: the worker's results went back
        through the pool's pipe before its loop ended. So, once the process body has
        done multiprocessing's own clean-up (its finalizers, the threads' shutdown,
        flushing ``sys.stdout`` and ``sys.stderr``), this does what finalization
        does first, the ``atexit`` handlers, flushes the C library's streams (what a
        simulator printed), and leaves with :func:`os._exit` and the same status.
        """
        code: int = super()._bootstrap(parent_sentinel)  # type: ignore[misc]  # not in typeshed
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            ctypes.CDLL(None).fflush(None)
        except Exception:  # a broken stream, no libc: let the interpreter exit normally
            return code
        os._exit(code)


class _PinnedSpawnContext(SpawnContext):
    Process = _PinnedSpawnProcess


class LocalExecutor(Executor):
    """A persistent pool of spawned worker processes, rebuilt if one of them dies.

    Each worker applies ``limits`` (:class:`WorkerLimits`; the defaults when not
    given, ``WorkerLimits(None, None, None, None, False)`` for none), as changed by the
    task's rollout kind (:attr:`~ale_robotics.model.rollout_kind.RolloutKind.worker_needs`:
    JAX/XLA reserves far more address space than ``RLIMIT_AS`` allows). Workers are
    started with their limits, so each such profile has a pool of its own.
    """

    kind = "local"

    def __init__(self, workers: int | None = None, limits: WorkerLimits | None = None) -> None:
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self.limits = limits if limits is not None else WorkerLimits()
        self._ctx = _PinnedSpawnContext()
        self._pools: dict[_Profile, tuple[ProcessPoolExecutor, Any]] = {}
        """One pool (and its progress queue) per worker profile in use."""
        self._warm_task_json: str | None = None
        """The task every new worker warms up for (:meth:`prestart`), if any."""
        self._workers_up: threading.Event | None = None
        """Set once the workers :meth:`prestart` started are up (None: it was not called)."""
        self._lock = threading.Lock()

    def _profile(self, task: TaskSpec | None) -> _Profile:
        """The limits and worker count for ``task``'s shards (None: the executor's own)."""
        limits, workers = self.limits, self.workers
        needs = None if task is None else get_kind(task.eval.rollout).worker_needs
        if needs is not None:
            if needs.unlimited_address_space:
                limits = dataclasses.replace(limits, address_space_bytes=None)
            if needs.max_workers is not None:
                workers = max(1, min(workers, needs.max_workers))
        return limits, workers

    def _get(self, profile: _Profile | None = None) -> tuple[ProcessPoolExecutor, Any]:
        profile = profile or self._profile(None)
        with self._lock:
            if profile not in self._pools:
                limits, workers = profile
                progress = self._ctx.Queue()
                pool = ProcessPoolExecutor(
                    workers,
                    mp_context=self._ctx,
                    initializer=_init_worker,
                    initargs=(progress, limits, self._warm_task_json),
                )
                self._pools[profile] = (pool, progress)
            return self._pools[profile]

    def prestart(self, task: TaskSpec) -> int:
        """Start the workers a job of ``task`` will use now, each warmed up for it.

        For callers that know a job is coming (the harness, while its agent starts):
        the workers' start-up (:func:`_warm_up`) then overlaps the wait instead of
        delaying the job. Starts as many processes as a full evaluation of ``task``
        has shards, at most :attr:`workers`, and none for an interactive task (its
        episodes run in the evaluator's sessions, not here). Returns at once, with the
        number of processes asked for: they start in the background, and a job that
        arrives meanwhile waits for them (:meth:`_await_prestart`), as it would have
        for cold ones. Workers that already run are kept as they are (0 is returned); a
        pool rebuilt after a crash warms up for ``task`` again. Results never depend on
        it: a warm-up only imports and builds what a shard would.
        """
        if task.mode is TaskMode.INTERACTIVE:
            return 0
        profile = self._profile(task)
        with self._lock:
            if profile in self._pools:
                return 0
            self._warm_task_json = task.model_dump_json()
        shards = math.ceil(task.eval.episodes / task.eval.envs_per_shard)
        n = max(1, min(profile[1], shards))
        pool, _ = self._get(profile)
        up = self._workers_up = threading.Event()
        # Starting a process takes a few ms of this thread (more on a loaded host, and
        # the first one also starts multiprocessing's resource tracker): not the caller's.
        threading.Thread(
            target=_start_workers, args=(pool, n, up), name="ale-worker-prestart", daemon=True
        ).start()
        return n

    def _await_prestart(self, deadline: float | None, abort: threading.Event | None) -> None:
        """Wait for the workers :meth:`prestart` is starting, if it is.

        Submitted while they warm up, a job would make the pool start a cold process
        more (it starts one whenever none is idle), which is never ready before the
        warm ones and takes the CPU they and the job need. Bounded by
        :data:`PRESTART_WAIT_S`; the deadline and ``abort`` act as in :meth:`run`.
        """
        up = self._workers_up
        if up is None:
            return
        give_up = time.monotonic() + PRESTART_WAIT_S
        while not up.wait(0.05):
            if abort is not None and abort.is_set():
                raise RolloutAborted("the rollouts were stopped")
            now = time.monotonic()
            if deadline is not None and now > deadline:
                raise TimeoutError("evaluation deadline passed")
            if now > give_up:
                log.warning("rollout workers still starting after %.0f s", PRESTART_WAIT_S)
                return

    def _discard(self) -> None:
        """Drop the pool and kill its processes (a timed-out shard must not keep running).

        No future is cancelled: the executor's manager thread marks every pending
        one broken once it sees the workers gone, and on Python 3.11 it dies with
        an ``InvalidStateError`` traceback (and leaks the pool's semaphores) when
        one of them was cancelled first."""
        with self._lock:
            for pool, _ in self._pools.values():
                # ProcessPoolExecutor only gains terminate_workers() in Python 3.14.
                procs = list(getattr(pool, "_processes", {}).values())
                for proc in procs:
                    proc.kill()  # they ignore SIGTERM
                pool.shutdown(wait=False)
            self._pools.clear()

    def worker_pids(self) -> list[int]:
        """PIDs of the live worker processes (empty before the first job)."""
        with self._lock:
            procs = [
                p
                for pool, _ in self._pools.values()
                for p in getattr(pool, "_processes", {}).values()
            ]
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
            for pool, _ in self._pools.values():
                pool.shutdown(wait=True, cancel_futures=True)
            self._pools.clear()

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
        self._await_prestart(deadline, abort)
        pool, progress = self._get(self._profile(task))
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


_Profile = tuple[WorkerLimits, int]
"""A pool's worker limits and its number of workers."""
