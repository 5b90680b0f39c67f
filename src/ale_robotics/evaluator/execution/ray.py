"""The Ray executor: a job's shards as Ray tasks, on a local Ray instance or a cluster.

The Ray driver is not the evaluator's process: :class:`RayExecutor` starts a child process
that holds the Ray connection (:mod:`.ray_driver`; its Ray side: :mod:`.ray_shards`) and
talks to it over a socket pair. Ray's core worker ends the process it lives in when its
cluster goes away; now that is the driver, and the evaluator fails the job as an
infrastructure failure ("the Ray cluster at ADDR was lost: ...", :class:`.base.WorkerCrashed`,
which the runner retries within its bounds) and keeps serving. The next job starts a fresh
driver: it reconnects once the cluster is back, and fails fast while it is not. A driver
that says nothing for 60 s (its own progress check gives up after 30 s) is killed, as lost.
The driver dies with the evaluator, and a private local Ray instance with the driver.

Without an address the driver starts a private local Ray instance (``ray.init(address="local")``:
never someone else's cluster found on this host) with ``workers`` CPUs, no dashboard
and Ray's usage statistics off (nothing leaves the host). With an address
(``host:port`` of a cluster's head, or ``auto``) the driver connects to that cluster; the
evaluator's host must be a node of it (see the README's cluster recipe), and every
node must run the same software stack, which each shard checks (:class:`StackMismatch`).

What a shard computes is exactly the local executor's: the same layout
(:func:`.base.shard_layout`), the same function (:func:`.base.run_shard`) on the same
inputs (the weights are copied out of Ray's read-only object store first), one BLAS
thread per worker; results are bit-identical to the local executor's.

Limits, where Ray allows (the local executor's process limits, :class:`.base.WorkerLimits`,
need a process of one's own: Ray's workers are Ray's, multi-threaded, on Ray's network):

* one CPU per shard (``num_cpus=1``, as one process per shard locally), at most
  ``workers`` shards in flight;
* ``memory`` per shard (``shard_memory_bytes``, default 512 MiB): a scheduling
  reservation; Ray's memory monitor kills a task on a node that runs out (an
  infrastructure failure, as a breached ``RLIMIT_AS`` is locally);
* a per-shard time limit (``shard_timeout_s``, default the limits'
  ``cpu_seconds_per_shard``, wall-clock from the shard's start): past it the shard's
  worker is killed, :class:`.base.WorkerCrashed` (as ``SIGXCPU`` kills a local worker);
* no retries inside Ray (``max_retries=0``): a lost worker or node is an infrastructure
  failure, and the runner re-runs the job within its retry bounds;
* a rollout kind's :attr:`~ale_robotics.model.rollout_kind.RolloutKind.worker_needs`:
  ``max_workers`` caps the shards in flight (:func:`shards_in_flight`; Ray does not say
  which host a task lands on, so the cap is over the whole cluster, which keeps it on
  every host); ``unlimited_address_space`` needs nothing here, since Ray's workers have
  no ``RLIMIT_AS``.

Progress, heartbeats and failures: see :mod:`.ray_shards` (one small progress actor on
the driver's node, polled every 50 ms; a worker or node lost is :class:`.base.WorkerCrashed`,
a ``PolicyFault`` passes through unchanged, the first failing shard in index order decides).
The driver relays them; ``on_heartbeat`` is called once a second while the cluster answers.

Trust: the cluster sees what a local worker sees (submitted weights, hidden env
seeds), so it must be as trusted as the evaluator's host and unreachable to agents.
Ray's token authentication (on by default for a local instance: ``~/.ray/auth_token``)
guards its ports; a sandboxed agent has no network and does not see ``/tmp/ray``.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.engines.registry import engine_of_kind
from ale_robotics.evaluator.execution.base import (
    Executor,
    ExecutorUnavailable,
    Heartbeat,
    Progress,
    RolloutAborted,
    WorkerCrashed,
    WorkerLimits,
    shard_layout,
)
from ale_robotics.evaluator.execution.ray_driver import ShardJob
from ale_robotics.evaluator.execution.ray_process import (
    DriverDied,
    DriverProcess,
    relay,
    unreachable,
)
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks.spec import TaskMode, TaskSpec

if importlib.util.find_spec("ray") is None:  # pragma: no cover - ray is a dependency
    raise ExecutorUnavailable(
        "the ray executor needs Ray: pip install 'ray==2.60.0' "
        "(or install ale-robotics with its dependencies), or use --executor local"
    )

__all__ = [
    "DEFAULT_OBJECT_STORE_BYTES",
    "DEFAULT_SHARD_MEMORY_BYTES",
    "RayExecutor",
    "shards_in_flight",
]

log = logging.getLogger(__name__)

DEFAULT_SHARD_MEMORY_BYTES = 512 * 1024**2
"""Memory reserved per shard (a worker with MuJoCo loaded holds ~0.3 GiB resident)."""
DEFAULT_OBJECT_STORE_BYTES = 256 * 1024**2
"""Object store of a local Ray instance: it holds one job's weights at a time."""

_POLL_S = 0.05
_PROBE_S = 2.0
_SILENCE_S = 60.0
"""A driver silent this long during a run is killed and the cluster counted lost (it sends
a heartbeat a second while its cluster answers, and gives up on its own after 30 s)."""
_STOP_GRACE_S = 10.0
"""How long a driver may take to confirm a stop (abort, deadline) before it is killed."""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed worker its raylet has not reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def shards_in_flight(task: TaskSpec, workers: int) -> int:
    """How many of ``task``'s shards may run at once on ``workers`` CPUs: all of them,
    unless the task's rollout kind asks for fewer worker processes (``max_workers``: a
    JAX program that takes a whole host's cores, or its accelerator)."""
    needs = get_kind(task.eval.rollout).worker_needs
    if needs is None or needs.max_workers is None:
        return workers
    return max(1, min(workers, needs.max_workers))


class RayExecutor(Executor):
    """Shards as Ray tasks, driven by a child process; see the module docstring.

    ``workers``: shards in flight at once (default: a local instance's CPU count, as
    many as the local executor's processes; on a cluster, its CPUs). The local
    instance gets ``workers`` CPUs and an object store of ``object_store_bytes``.
    Raises :class:`.base.ExecutorUnavailable` when the first driver cannot join a
    cluster. A private instance starts in the background (3-4 s: its own start would
    otherwise delay whatever comes next, a harness's agent); the first call that needs it
    waits, and one that fails is logged and retried by the first job, which fails with it
    (:class:`.base.WorkerCrashed`).
    """

    kind = "ray"

    def __init__(
        self,
        workers: int | None = None,
        limits: WorkerLimits | None = None,
        *,
        address: str | None = None,
        shard_memory_bytes: int | None = DEFAULT_SHARD_MEMORY_BYTES,
        shard_timeout_s: float | None = None,
        object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES,
    ) -> None:
        self.limits = limits if limits is not None else WorkerLimits()
        self.address = address
        self.shard_memory_bytes = shard_memory_bytes
        cpu = self.limits.cpu_seconds_per_shard
        self.shard_timeout_s = shard_timeout_s if shard_timeout_s is not None else cpu
        """Wall-clock seconds a shard may run once started (None: no limit)."""
        self._cpus = workers or max(1, min(os.cpu_count() or 1, 8))
        self._object_store_bytes = object_store_bytes
        self.where = "a private local Ray instance" if address is None else f"{address}"
        self._run_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pids: dict[int, str] = {}
        self._closed = False
        self._node = ""
        self._cluster_address = ""
        self._stack: dict[str, str] = {}
        """What decides an episode's numbers in the driver, started as the workers are (their
        OpenBLAS kernel): every shard checks its worker's stack against it."""
        self._driver: DriverProcess | None = None
        self._first: threading.Thread | None = None
        if address is None:
            # A private instance takes 3-4 s to start (Ray's processes): in the background,
            # so that it overlaps what its owner does meanwhile (the harness: the agent's
            # start); the first driver call waits for it (_live_driver).
            self.workers = workers or self._cpus
            self._first = threading.Thread(
                target=self._start_first, name="ale-ray-start", daemon=True
            )
            self._first.start()
            return
        # A cluster: its CPUs make the default worker count, and an unreachable one fails here.
        self._driver = self._start_driver()
        self.workers = workers or int(self._driver.info["cpus"])

    # ------------------------------------------------------------- driver --

    def _start_driver(self) -> DriverProcess:
        driver = DriverProcess(self.address, self._cpus, self._object_store_bytes, self.where)
        self._node = str(driver.info["node"])
        self._cluster_address = str(driver.info["address"])
        self._stack = dict(driver.info["stack"])
        return driver

    @property
    def cluster_address(self) -> str:
        """The GCS address the driver is connected to (a local instance's too)."""
        self._wait_first()
        return self._cluster_address

    def _start_first(self) -> None:
        """The private instance's first driver (see ``__init__``); a failure is logged and the
        first job tries again, failing with the reason (``_live_driver``)."""
        try:
            driver = self._start_driver()
        except ExecutorUnavailable as exc:
            log.warning("%s", exc)
            return
        self._driver = driver

    def _wait_first(self) -> None:
        first = self._first
        if first is not None:
            first.join()
            self._first = None

    def _cluster(self) -> str:
        if self.address is None:
            return "the private local Ray instance"
        return f"the Ray cluster at {self.address}"

    def _live_driver(self) -> DriverProcess:
        """The running driver, or a fresh one (WorkerCrashed when Ray cannot be joined)."""
        self._wait_first()
        if self._closed:
            raise WorkerCrashed("the Ray executor was shut down")
        driver = self._driver
        if driver is not None and driver.alive():
            return driver
        if driver is not None:
            self._driver = None
            driver.close()
        try:
            self._driver = self._start_driver()
        except ExecutorUnavailable as exc:
            raise WorkerCrashed(str(exc)) from None
        return self._driver

    def _lost(self, driver: DriverProcess, why: str) -> WorkerCrashed:
        """The driver is gone (or killed here): the job failed by the infrastructure."""
        if self._driver is driver:
            self._driver = None
        driver.kill()
        if self._closed:
            return WorkerCrashed("the Ray executor was shut down")
        down = unreachable(self.address, _PROBE_S) if self.address is not None else None
        if down is not None and "does not answer" not in why:
            why = f"{why}; {self.address} does not answer ({down})"
        return WorkerCrashed(f"{self._cluster()} was lost: {why}")

    # ------------------------------------------------------------------ API --

    def worker_pids(self) -> list[int]:
        """PIDs of live Ray workers on this host that ran this executor's shards."""
        with self._lock:
            for pid in [p for p in self._pids if not alive(p)]:
                del self._pids[pid]
            return sorted(p for p, node in self._pids.items() if node == self._node)

    def driver_pid(self) -> int | None:
        """The Ray driver process's PID, while it runs (diagnostics and tests)."""
        self._wait_first()
        driver = self._driver
        return driver.proc.pid if driver is not None and driver.alive() else None

    def shutdown(self) -> None:
        self._closed = True
        self._wait_first()  # a first driver still starting: stopped once it is up
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()

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
        """See :meth:`.base.Executor.run`; the driver process runs the shards as Ray tasks."""
        engine = engine_of_kind(task.eval.rollout)
        if engine is not None:
            # Ray's workers are the evaluator's own interpreter: an engine's are not.
            raise WorkerCrashed(
                f"task {task.id} runs in the engine environment {engine.name!r}, where the "
                "ray executor cannot start workers: evaluate it with --executor local"
            )
        with self._run_lock:
            driver = self._live_driver()
            shards = shard_layout(task, seeds, indices)
            job = ShardJob(
                task_json=task.model_dump_json(),
                weights=weights,
                shards=shards,
                stack=dict(self._stack),
                in_flight=shards_in_flight(task, self.workers),
                deadline=deadline,
                shard_timeout_s=self.shard_timeout_s,
                shard_memory_bytes=self.shard_memory_bytes,
            )
            try:
                driver.send(("run", job))
                follow = _Follow(self, driver, on_progress, on_heartbeat)
                outcomes = follow.until_done(abort, deadline)
            except DriverDied as exc:
                raise self._lost(driver, str(exc)) from None
            total = sum(len(shard) for shard in shards)
            if on_progress is not None and follow.reported != total:
                on_progress(total)
            return outcomes

    def prestart(self, task: TaskSpec) -> int:
        """Warm up, in the background, as many Ray workers as a job of ``task`` runs shards
        at once (:meth:`.base.Executor.prestart`): the progress board and each worker's
        first imports and env, which otherwise cost a cold job's first shards about 2 s on
        two cores. A job that arrives meanwhile waits for it (one driver call at a time)."""
        if task.mode is TaskMode.INTERACTIVE or self._closed:
            return 0
        shards = math.ceil(task.eval.evaluated_episodes / task.eval.envs_per_shard)
        n = max(1, min(self.workers, shards))
        args = (task.model_dump_json(), n)
        threading.Thread(target=self._warm, args=args, name="ale-ray-prestart", daemon=True).start()
        return n

    def _warm(self, task_json: str, n: int) -> None:
        with self._run_lock:
            try:
                driver = self._live_driver()
            except WorkerCrashed as exc:
                log.warning("Ray workers not warmed up: %s", exc)
                return
            try:
                driver.send(("warm", task_json, n))
                _Follow(self, driver, None, None).until_done(None, None)
            except DriverDied as exc:
                self._lost(driver, str(exc))
            except Exception as exc:  # best effort: the job starts cold and says why
                log.warning("Ray workers not warmed up: %s", exc)

    def _seen(self, pid: int, node: str) -> None:
        with self._lock:
            self._pids[pid] = node


class _Follow:
    """One run's messages from the driver, passed to the caller's callbacks."""

    def __init__(
        self,
        executor: RayExecutor,
        driver: DriverProcess,
        on_progress: Progress | None,
        on_heartbeat: Heartbeat | None,
    ) -> None:
        self.executor = executor
        self.driver = driver
        self.on_progress = on_progress
        self.on_heartbeat = on_heartbeat
        self.reported = 0
        self.ended = False

    def until_done(
        self, abort: threading.Event | None, deadline: float | None
    ) -> list[EpisodeOutcome]:
        """The run's outcomes, or its error; a callback's error stops the driver's run."""
        try:
            return self._follow(abort, deadline)
        except DriverDied:
            raise
        except BaseException:
            if not self.ended:
                self._stop()
            raise

    def _follow(
        self, abort: threading.Event | None, deadline: float | None
    ) -> list[EpisodeOutcome]:
        heard = time.monotonic()
        asked: float | None = None
        while True:
            if asked is None and abort is not None and abort.is_set():
                self.driver.send(("abort",))
                asked = time.monotonic()
            message = self.driver.receive(_POLL_S)
            now = time.monotonic()
            if message is not None:
                heard = now
                result = self._handle(message)
                if result is not None:
                    return result
                continue
            if now - heard > _SILENCE_S:
                raise DriverDied(f"the Ray driver stopped answering for {_SILENCE_S:.0f}s")
            if asked is not None and now - asked > _STOP_GRACE_S:
                self.executor._lost(self.driver, "the Ray driver did not stop")
                raise RolloutAborted("the rollouts were stopped")
            if deadline is not None and now > deadline + _STOP_GRACE_S:
                self.executor._lost(self.driver, "the Ray driver did not stop")
                raise TimeoutError("evaluation deadline passed")

    def _handle(self, message: tuple[Any, ...]) -> list[EpisodeOutcome] | None:
        kind = message[0]
        if kind == "lost":  # the cluster, says the driver: it is replaced
            raise DriverDied(str(message[1]))
        if kind == "started":
            self.executor._seen(int(message[1]), str(message[2]))
        elif kind == "progress":
            self.reported = int(message[1])
            if self.on_progress is not None:
                self.on_progress(self.reported)
        elif kind == "beat":
            if self.on_heartbeat is not None:
                self.on_heartbeat()
        elif kind == "log":
            relay(message)
        else:
            self.ended = True
            if kind == "done":
                outcomes: list[EpisodeOutcome] = message[1]
                return outcomes
            if kind == "fault":
                raise message[1]
            if kind == "timeout":
                raise TimeoutError(str(message[1]))
            if kind == "aborted":
                raise RolloutAborted("the rollouts were stopped")
            raise WorkerCrashed(str(message[1]))
        return None

    def _stop(self) -> None:
        """Stop the driver's run (a callback failed): its shards cancelled, or it killed."""
        end = time.monotonic() + _STOP_GRACE_S
        try:
            self.driver.send(("abort",))
            while time.monotonic() < end:
                message = self.driver.receive(_POLL_S)
                if message is not None and message[0] not in ("started", "progress", "beat", "log"):
                    return
        except DriverDied:
            return
        self.executor._lost(self.driver, "the Ray driver did not stop")
