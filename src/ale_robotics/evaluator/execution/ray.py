"""The Ray executor: a job's shards as Ray tasks, on a local Ray instance or a cluster.

Without an address it starts a private local Ray instance (``ray.init(address="local")``:
never someone else's cluster found on this host) with ``workers`` CPUs, no dashboard
and Ray's usage statistics off (nothing leaves the host). With an address
(``host:port`` of a cluster's head, or ``auto``) it connects to that cluster; the
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

Progress and heartbeats: every shard posts to one small actor of this executor
(:class:`_ProgressBoard`, no CPU): "started" (with its worker's PID and node) and
one post per finished episode. The driver polls ``ray.wait`` on the shards' futures
and the board every 50 ms; ``on_progress`` gets the episodes done, ``on_heartbeat``
is called once a second while the board answers (a cluster that stops answering
for 30 s fails the run as :class:`.base.WorkerCrashed`).

Failures: a shard whose worker died (killed, out of memory, its node lost) or that
raised anything but :class:`.pipeline.PolicyFault` is :class:`.base.WorkerCrashed`
(logged with long numbers redacted); a ``PolicyFault`` passes through unchanged. As
locally, the first failing shard in index order decides: later shards are cancelled,
earlier ones finish. ``abort``, the deadline and a shard's time limit cancel the
running shards (their workers are killed, ``force=True``).

Trust: the cluster sees what a local worker sees (submitted weights, hidden env
seeds), so it must be as trusted as the evaluator's host and unreachable to agents.
Ray's token authentication (on by default for a local instance: ``~/.ray/auth_token``)
guards its ports; a sandboxed agent has no network and does not see ``/tmp/ray``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.execution.base import (
    Executor,
    ExecutorUnavailable,
    Heartbeat,
    Progress,
    RolloutAborted,
    Shard,
    StackMismatch,
    WorkerCrashed,
    WorkerLimits,
    in_index_order,
    redacted,
    run_shard,
    shard_layout,
    stack_mismatch,
    stack_versions,
)
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks.spec import TaskSpec

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayError, RayTaskError
except ImportError as exc:  # pragma: no cover - ray is a dependency; a trimmed install
    raise ExecutorUnavailable(
        "the ray executor needs Ray: pip install 'ray==2.60.0' "
        "(or install ale-robotics with its dependencies), or use --executor local"
    ) from exc

from ale_robotics.evaluator.execution.ray_connection import (
    THREAD_ENV,
    alive,
    connect,
    disconnect,
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
_HEARTBEAT_S = 1.0
_RPC_TIMEOUT_S = 30.0
"""How long the progress board may take to answer before the cluster counts as lost."""
_CANCEL_WAIT_S = 1.5
"""How long a cancel waits for Ray to resolve the killed shards (see ``RayExecutor._cancel``)."""

# ------------------------------------------------------------ in Ray workers --


class _ProgressBoard:
    """One per executor: shards post here, the driver takes the posts of its run."""

    def __init__(self) -> None:
        self._posts: dict[str, list[tuple[Any, ...]]] = {}

    def post(self, tag: str, message: tuple[Any, ...]) -> None:
        self._posts.setdefault(tag, []).append(message)

    def take(self, tag: str) -> list[tuple[Any, ...]]:
        return self._posts.pop(tag, [])


_Board: Any = ray.remote(num_cpus=0, max_restarts=0)(_ProgressBoard)


def _shard_in_ray(
    board: Any,
    tag: str,
    shard: int,
    stack: dict[str, str],
    task_json: str,
    weights: dict[str, npt.NDArray[np.floating]],
    seeds: Shard,
) -> list[EpisodeOutcome]:
    """A Ray task: :func:`.base.run_shard` on one shard, posting progress to ``board``."""
    mismatch = stack_mismatch(stack)
    if mismatch is not None:
        raise StackMismatch(mismatch)
    node = ray.get_runtime_context().get_node_id()
    board.post.remote(tag, ("start", shard, os.getpid(), node))
    # Ray hands numpy arrays out of its object store read-only and shared; the local
    # executor's shards get private, writable copies (unpickled): so do these.
    own = {key: np.array(value, copy=True) for key, value in weights.items()}

    def report() -> None:
        board.post.remote(tag, ("episode", shard))

    return run_shard(task_json, own, seeds, report)


_shard_task: Any = ray.remote(max_retries=0)(_shard_in_ray)


# ------------------------------------------------------------------ executor --


def shards_in_flight(task: TaskSpec, workers: int) -> int:
    """How many of ``task``'s shards may run at once on ``workers`` CPUs: all of them,
    unless the task's rollout kind asks for fewer worker processes (``max_workers``: a
    JAX program that takes a whole host's cores, or its accelerator)."""
    needs = get_kind(task.eval.rollout).worker_needs
    if needs is None or needs.max_workers is None:
        return workers
    return max(1, min(workers, needs.max_workers))


class RayExecutor(Executor):
    """Shards as Ray tasks; see the module docstring for limits, progress and failures.

    ``workers``: shards in flight at once (default: a local instance's CPU count, as
    many as the local executor's processes; on a cluster, its CPUs). The local
    instance gets ``workers`` CPUs and an object store of ``object_store_bytes``.
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
        local = workers or max(1, min(os.cpu_count() or 1, 8))
        self._pinned = connect(address, local, object_store_bytes)
        self._connected = True
        if workers is None and address is not None:
            resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
            workers = max(1, int(resources.get("CPU", 1)))
        self.workers = workers or local
        self._node = ray.get_runtime_context().get_node_id()
        self._stack = stack_versions()
        self._lock = threading.Lock()
        self._board: Any = None
        self._pids: dict[int, str] = {}

    # ------------------------------------------------------------- helpers --

    def _get_board(self) -> Any:
        with self._lock:
            if self._board is None:
                self._board = _Board.remote()
            return self._board

    def _lose_board(self) -> None:
        with self._lock:
            board, self._board = self._board, None
        if board is not None:
            with contextlib.suppress(RayError):
                ray.kill(board)

    def _options(self, shard: int) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": 1, "name": f"ale-robotics shard {shard}"}
        if self.shard_memory_bytes is not None:
            opts["memory"] = self.shard_memory_bytes
        if not self._pinned:
            opts["runtime_env"] = {"env_vars": dict(THREAD_ENV)}
        return opts

    @staticmethod
    def _cancel(refs: Sequence[Any]) -> None:
        """Stop these shards now: their workers are killed (Ray starts fresh ones).

        Then wait (at most :data:`_CANCEL_WAIT_S`) until Ray has resolved them: a kill is
        asynchronous, and a job submitted right after a deadline could otherwise be handed
        a worker that is still being killed, and fail as a lost worker."""
        for ref in refs:
            with contextlib.suppress(RayError, ValueError):
                ray.cancel(ref, force=True)
        if refs:
            with contextlib.suppress(RayError, ValueError):
                ray.wait(list(refs), num_returns=len(refs), timeout=_CANCEL_WAIT_S)

    def _failure(self, exc: RayError) -> BaseException:
        """What a failed shard means for the run: the policy's fault or the infrastructure's."""
        if isinstance(exc, RayTaskError):
            cause = exc.cause
            if isinstance(cause, PolicyFault):
                return cause  # the submission's failure, detected on purpose
            if isinstance(cause, StackMismatch):
                log.error("%s", cause)
                return WorkerCrashed(str(cause))
            # never the (validated) submission's fault; the message may mention values a
            # status must not show, so only the type is reported
            log.error("rollout shard failed on Ray: %s", redacted(cause or exc))
            return WorkerCrashed(f"a Ray worker failed ({type(cause or exc).__name__})")
        log.error("rollout shard lost on Ray: %s", redacted(exc))
        return WorkerCrashed(f"a Ray worker died ({type(exc).__name__})")

    def _take(self, board: Any, tag: str) -> list[tuple[Any, ...]]:
        try:
            posts: list[tuple[Any, ...]] = ray.get(board.take.remote(tag), timeout=_RPC_TIMEOUT_S)
        except (GetTimeoutError, RayError) as exc:
            self._lose_board()
            log.error("the Ray progress board stopped answering: %s", redacted(exc))
            raise WorkerCrashed(
                f"the Ray cluster stopped answering ({type(exc).__name__})"
            ) from None
        return posts

    # ------------------------------------------------------------------ API --

    def worker_pids(self) -> list[int]:
        """PIDs of live Ray workers on this host that ran this executor's shards."""
        with self._lock:
            for pid in [p for p in self._pids if not alive(p)]:
                del self._pids[pid]
            return sorted(p for p, node in self._pids.items() if node == self._node)

    def shutdown(self) -> None:
        self._lose_board()
        if self._connected:
            self._connected = False
            disconnect()

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
        """See :meth:`.base.Executor.run`; the shards become Ray tasks."""
        if not self._connected:
            raise WorkerCrashed("the Ray executor was shut down")
        shards = shard_layout(task, seeds, indices)
        total = sum(len(shard) for shard in shards)
        tag = uuid.uuid4().hex
        board = self._get_board()
        try:
            weights_ref = ray.put(weights)
        except RayError as exc:
            raise WorkerCrashed(f"cannot store the weights in Ray ({type(exc).__name__})") from None
        task_json = task.model_dump_json()
        todo = deque(range(len(shards)))
        running: dict[Any, int] = {}
        results: dict[int, list[EpisodeOutcome]] = {}
        failures: dict[int, BaseException] = {}
        counts = [0] * len(shards)
        started: dict[int, float] = {}
        reported = 0
        beat = time.monotonic()
        in_flight = shards_in_flight(task, self.workers)
        try:
            while True:
                while todo and len(running) < in_flight:
                    i = todo.popleft()
                    ref = _shard_task.options(**self._options(i)).remote(
                        board, tag, i, self._stack, task_json, weights_ref, shards[i]
                    )
                    running[ref] = i
                if running:
                    ready, _ = ray.wait(list(running), num_returns=len(running), timeout=_POLL_S)
                else:
                    ready = []
                for ref in sorted(ready, key=running.__getitem__):  # in index order
                    if ref not in running:  # dropped: after a shard that failed
                        continue
                    i = running.pop(ref)
                    try:
                        results[i] = ray.get(ref)
                        counts[i] = len(shards[i])
                    except RayError as exc:
                        failures[i] = self._failure(exc)
                        # shards after the first failing one cannot change the outcome
                        for j in [j for j in todo if j > i]:
                            todo.remove(j)
                        late = [r for r, j in running.items() if j > i]
                        for r in late:
                            del running[r]
                        self._cancel(late)
                for message in self._take(board, tag):
                    kind, i = message[0], message[1]
                    if kind == "start":
                        started.setdefault(i, time.monotonic())
                        with self._lock:
                            self._pids[int(message[2])] = str(message[3])
                    elif i not in results:
                        counts[i] = min(counts[i] + 1, len(shards[i]))
                if on_heartbeat is not None and time.monotonic() - beat > _HEARTBEAT_S:
                    beat = time.monotonic()
                    on_heartbeat()
                done = sum(counts)
                if on_progress is not None and done > reported and not failures:
                    reported = done
                    on_progress(done)
                if not running and not todo:
                    break
                if abort is not None and abort.is_set():
                    raise RolloutAborted("the rollouts were stopped")
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("evaluation deadline passed")
                self._check_shard_times(started, running)
        except BaseException:
            self._cancel(list(running))
            raise
        if failures:
            raise failures[min(failures)]
        if on_progress is not None and reported != total:
            on_progress(total)
        return in_index_order([results[i] for i in range(len(shards))])

    def _check_shard_times(self, started: dict[int, float], running: dict[Any, int]) -> None:
        if self.shard_timeout_s is None:
            return
        now = time.monotonic()
        for i in running.values():
            if i in started and now - started[i] > self.shard_timeout_s:
                log.error("rollout shard %d ran past its %gs limit", i, self.shard_timeout_s)
                raise WorkerCrashed(
                    f"a shard ran past its time limit of {self.shard_timeout_s:g}s on Ray"
                )
