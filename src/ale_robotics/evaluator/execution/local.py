"""The local executor: spawned worker processes, limited, isolated, replaced on a crash.

:class:`LocalExecutor` is the default :class:`~.base.Executor`.

BLAS is pinned to one thread per worker, or its threads fight MuJoCo.

Starting: a spawned worker takes a few tenths of a second before it can run a
shard (the interpreter, numpy, the task model, the rollout kind, the simulator
and one env of the task). Started by the first job, that time is the job's; the
harness calls :meth:`LocalExecutor.prestart` while its agent starts instead, so
the workers are up and warm when the submission arrives (:func:`warm_up`).
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

import dataclasses
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.engines.launch import WorkerLaunch
from ale_robotics.engines.usage import require_engine
from ale_robotics.evaluator.execution.base import (
    Executor,
    Heartbeat,
    Progress,
    RolloutAborted,
    WorkerCrashed,
    WorkerLimits,
    in_index_order,
    redacted,
    shard_layout,
)
from ale_robotics.evaluator.execution.engine_spawn import EngineSpawnContext
from ale_robotics.evaluator.execution.weights_handoff import published
from ale_robotics.evaluator.execution.worker_process import (
    PRESTART_WAIT_S,
    PinnedSpawnContext,
    init_worker,
    run_shard_in_worker,
    start_workers,
)
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks.spec import TaskMode, TaskSpec

__all__ = ["LocalExecutor"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class LocalExecutor(Executor):
    """A persistent pool of spawned worker processes, rebuilt if one of them dies.

    Each worker applies ``limits`` (:class:`WorkerLimits`; the defaults when not
    given, ``WorkerLimits(None, None, None, None, False)`` for none), as changed by the
    task's rollout kind (:attr:`~ale_robotics.model.rollout_kind.RolloutKind.worker_needs`:
    JAX/XLA reserves far more address space than ``RLIMIT_AS`` allows). Workers are
    started with their limits, so each such profile has a pool of its own; so has each
    engine environment a kind runs in (:attr:`~ale_robotics.model.rollout_kind.RolloutKind.engine`:
    its workers start with the engine's interpreter, :mod:`.engine_spawn`), and a task whose
    engine is not installed is refused (:class:`~ale_robotics.engines.EngineNotInstalled`)
    before any worker starts.
    """

    kind = "local"

    def __init__(self, workers: int | None = None, limits: WorkerLimits | None = None) -> None:
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self.limits = limits if limits is not None else WorkerLimits()
        self._ctx = PinnedSpawnContext()
        self._pools: dict[_Profile, tuple[ProcessPoolExecutor, Any]] = {}
        """One pool (and its progress queue) per worker profile in use."""
        self._warm_task_json: str | None = None
        """The task every new worker warms up for (:meth:`prestart`), if any."""
        self._workers_up: threading.Event | None = None
        """Set once the workers :meth:`prestart` started are up (None: it was not called)."""
        self._lock = threading.Lock()

    def _profile(self, task: TaskSpec | None) -> _Profile:
        """The limits, worker count and engine for ``task``'s shards (None: the executor's
        own); :class:`~ale_robotics.engines.EngineNotInstalled` when its engine is not built."""
        limits, workers = self.limits, self.workers
        needs = None if task is None else get_kind(task.eval.rollout).worker_needs
        if needs is not None:
            if needs.unlimited_address_space:
                limits = dataclasses.replace(limits, address_space_bytes=None)
            if needs.max_workers is not None:
                workers = max(1, min(workers, needs.max_workers))
        return limits, workers, None if task is None else require_engine(task)

    def _get(self, profile: _Profile | None = None) -> tuple[ProcessPoolExecutor, Any]:
        profile = profile or self._profile(None)
        with self._lock:
            if profile not in self._pools:
                limits, workers, launch = profile
                ctx = self._ctx if launch is None else EngineSpawnContext(launch)
                progress = ctx.Queue()
                pool = ProcessPoolExecutor(
                    workers,
                    mp_context=ctx,
                    initializer=init_worker,
                    initargs=(progress, limits, self._warm_task_json),
                )
                self._pools[profile] = (pool, progress)
            return self._pools[profile]

    def prestart(self, task: TaskSpec) -> int:
        """Start the workers a job of ``task`` will use now, each warmed up for it.

        For callers that know a job is coming (the harness, while its agent starts):
        the workers' start-up (:func:`warm_up`) then overlaps the wait instead of
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
        try:
            profile = self._profile(task)
        except EngineUnavailable as exc:  # its job is refused, or fails, saying so
            log.info("rollout workers not started ahead of the job: %s", exc)
            return 0
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
            target=start_workers, args=(pool, n, up), name="ale-worker-prestart", daemon=True
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

    def run_in_worker(
        self,
        fn: Callable[..., T],
        *args: Any,
        timeout: float = 60.0,
        task: TaskSpec | None = None,
    ) -> T:
        """Run a picklable callable in a worker and return its result.

        A diagnostic hook (what does a worker see, which limits apply?) for
        operators and tests; rollouts go through :meth:`run`. ``task``: in a worker of
        that task's pool (its kind's limits and engine), not the executor's default one.
        """
        pool, _ = self._get(None if task is None else self._profile(task))
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
        try:
            profile = self._profile(task)
        except EngineUnavailable as exc:
            # Submissions of such a task are refused; an engine removed since is this
            # host's failure, never the submission's (the message says how to build it).
            raise WorkerCrashed(str(exc)) from None
        pool, progress = self._get(profile)
        shards = shard_layout(task, seeds, indices)
        total = sum(len(shard) for shard in shards)
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        task_json = task.model_dump_json()
        with published(weights) as ref:
            try:
                futures: list[Future[list[EpisodeOutcome]]] = [
                    pool.submit(run_shard_in_worker, tag, task_json, ref, shard) for shard in shards
                ]
            except BrokenProcessPool as exc:
                self._discard()
                raise WorkerCrashed(f"worker pool broken: {exc}") from None
            done = self._follow(futures, tag, progress, on_progress, on_heartbeat, deadline, abort)
            per_shard = self._results(futures)
        if on_progress is not None and done != total:
            on_progress(total)
        return in_index_order(per_shard)

    def _follow(
        self,
        futures: list[Future[list[EpisodeOutcome]]],
        tag: str,
        progress: Any,
        on_progress: Progress | None,
        on_heartbeat: Heartbeat | None,
        deadline: float | None,
        abort: threading.Event | None,
    ) -> int:
        """Wait for the shards, passing on their progress; the episodes reported done."""
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
                    if msg_tag == f"{tag}:shard" and self.on_shard is not None:
                        self.on_shard(n)
                    elif msg_tag == tag:
                        done += n
                        if on_progress is not None:
                            on_progress(done)
            except queue.Empty:
                pass
            if not pending:
                return done
            if abort is not None and abort.is_set():
                self._discard()
                raise RolloutAborted("the rollouts were stopped")
            if deadline is not None and time.monotonic() > deadline:
                self._discard()
                raise TimeoutError("evaluation deadline passed")

    def _results(self, futures: list[Future[list[EpisodeOutcome]]]) -> list[list[EpisodeOutcome]]:
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
        return per_shard


_Profile = tuple[WorkerLimits, int, WorkerLaunch | None]
"""A pool's worker limits, its number of workers and the engine its workers start in
(None: the evaluator's own environment)."""
