"""What runs inside a local executor's worker process, and how one is spawned.

Split from :mod:`.local`, whose :class:`~.local.LocalExecutor` owns the pools: here are
the worker's own limits (rlimits, its own user and network namespace), its start-up
(signals ignored, BLAS pinned, a watch that ends it with its parent, the task warmed
up), the shard it runs with its progress
reports, and the spawn context that starts it with the pinned environment.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path
from typing import Any

from ale_robotics.evaluator.execution.base import (
    Shard,
    WorkerLimits,
    redacted,
    run_shard,
)
from ale_robotics.evaluator.execution.blas import worker_blas_env
from ale_robotics.evaluator.execution.weights_handoff import WeightsRef, resolve
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "PARENT_CHECK_S",
    "PRESTART_WAIT_S",
    "PROGRESS_EVERY_S",
    "STOP_SIGNALS",
    "PinnedSpawnContext",
    "init_worker",
    "pinned_env",
    "run_shard_in_worker",
    "start_workers",
    "warm_up",
]

log = logging.getLogger(__name__)

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

_PROGRESS: Any = None

PROGRESS_EVERY_S = 0.1
"""A worker reports finished episodes at most this often (and all of them when a shard ends)."""
_LIMITS: WorkerLimits | None = None
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
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


def warm_up(task_json: str) -> None:
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


def init_worker(
    progress: Any, limits: WorkerLimits | None = None, warm_task_json: str | None = None
) -> None:
    global _LIMITS, _PROGRESS
    # The parent stops workers (see the module docstring); the signals arrived
    # blocked (:class:`_PinnedSpawnProcess`), so one sent during startup is discarded.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    _PROGRESS = progress
    _LIMITS = limits
    _no_gl()
    if limits is not None:
        _apply_limits(limits)
    # after the limits: their unshare(CLONE_NEWUSER) is refused to a process with threads
    _die_with_parent()
    if warm_task_json is not None:
        warm_up(warm_task_json)


PARENT_CHECK_S = 0.5
"""How often a worker checks that the process that started it is still its parent."""


def _die_with_parent() -> None:
    """End this worker when its parent (the evaluator, or the harness that embeds it) dies.

    Workers ignore SIGINT and SIGTERM (the parent stops them, and a terminal's Ctrl-C
    must reach the evaluator, which drains or stops them, not the workers), so a parent
    killed with SIGKILL used to leave them running for good, orphaned, with their memory
    (issue 31). A daemon thread compares the parent pid every :data:`PARENT_CHECK_S`
    seconds, busy or idle (the shard's numpy and simulator code releases the GIL, and the
    interpreter switches threads while it holds it), and leaves with ``os._exit`` once
    the worker was re-parented. The pid to compare with is the one the parent wrote on
    the spawn command line (``multiprocessing.parent_process``), so a parent that died
    while this worker was starting is noticed too.

    Not ``PR_SET_PDEATHSIG``: that fires when the *thread* that spawned the worker ends,
    and the pool spawns workers from short-lived threads (prestart, a job's thread). Not
    the spawn sentinel (a pipe whose write end the parent holds): a child the parent
    forks would inherit that end and keep it open after the parent's death.

    A thread the limits leave no room for (``RLIMIT_AS``, ``RLIMIT_NPROC``) is logged,
    not fatal: the worker still runs shards, as it did before it had a watch.
    """
    spawner = multiprocessing.parent_process()
    parent = spawner.pid if spawner is not None and spawner.pid else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    try:
        threading.Thread(target=watch, name="ale-parent-watch", daemon=True).start()
    except RuntimeError as exc:  # can't start new thread
        log.warning("rollout worker %d will not notice its parent's death: %s", os.getpid(), exc)


def _started() -> int:
    """A no-op task: submitting one makes the pool start a worker (see ``prestart``)."""
    return os.getpid()


def start_workers(pool: ProcessPoolExecutor, n: int, up: threading.Event) -> None:
    """Make ``pool`` start ``n`` processes (it starts one per submission while none is
    idle) and set ``up`` once they all answered, or could not start."""
    try:
        started = [pool.submit(_started) for _ in range(n)]
        wait(started)
    except (BrokenProcessPool, RuntimeError) as exc:  # broken or shut down meanwhile
        log.info("rollout workers not started ahead of the job: %s", exc)
    finally:
        up.set()


def run_shard_in_worker(
    tag: str,
    task_json: str,
    weights: WeightsRef,
    seeds: Shard,
) -> list[EpisodeOutcome]:
    """Run one shard; the job's weights by reference (:mod:`.weights_handoff`)."""
    if _LIMITS is not None:
        _arm_cpu_limit(_LIMITS)

    t0 = time.monotonic()
    unsent, sent_at = 0, t0

    def report() -> None:
        # Coalesced: a queue put per episode (pickle, feeder thread, pipe, unpickle) cost
        # about as much as a short episode's own steps; progress needs no finer grain.
        nonlocal unsent, sent_at
        unsent += 1
        now = time.monotonic()
        if _PROGRESS is not None and now - sent_at >= PROGRESS_EVERY_S:
            _PROGRESS.put((tag, unsent))
            unsent, sent_at = 0, now

    outcomes = run_shard(task_json, resolve(weights), seeds, report)
    if _PROGRESS is not None:
        if unsent:
            _PROGRESS.put((tag, unsent))
        # the shard's own seconds, for the evaluator's metrics
        _PROGRESS.put((f"{tag}:shard", time.monotonic() - t0))
    return outcomes


_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def pinned_env(extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """Set the BLAS/OpenMP thread variables to 1, and the OpenBLAS kernel
    (:func:`~ale_robotics.evaluator.execution.blas.worker_blas_env`), in ``os.environ`` for a
    moment, with ``extra`` (an engine worker's variables, :mod:`.engine_spawn`).

    A spawned child copies the parent's environment when it starts, and the BLAS
    library reads these variables once, when numpy is imported there.
    """
    pinned = {v: "1" for v in _THREAD_VARS} | worker_blas_env() | dict(extra or {})
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
    interpreter starts stays pending until :func:`init_worker` ignores it.
    (Only the main thread may change a handler; any thread may change its mask.)
    """

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with pinned_env():
            old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
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


class PinnedSpawnContext(SpawnContext):
    Process = _PinnedSpawnProcess
