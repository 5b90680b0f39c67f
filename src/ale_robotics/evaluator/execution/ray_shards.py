"""A job's shards as Ray tasks, run by the Ray driver process (:mod:`.ray_driver`).

This is the Ray side of :class:`.ray.RayExecutor`; it runs only in the driver process,
never in the evaluator's (see :mod:`.ray` for why and for the limits it maps onto Ray).

Progress: every shard posts to one small actor of the driver (:class:`_ProgressBoard`, no
CPU, pinned to the driver's own node so that losing another node never loses it): "started"
(with its worker's PID and node) and one post per finished episode. :meth:`ShardRun.run`
polls ``ray.wait`` on the shards' futures and the board every 50 ms and reports through
:class:`Report`. A board that does not answer within 2 s has the cluster's GCS probed: one
that refuses connections (the cluster stopped) fails the run at once as
:class:`ClusterLost`, a :class:`.base.WorkerCrashed`; a cluster that accepts connections
but does not answer for 30 s, likewise.

Failures: a shard whose worker died (killed, out of memory, its node lost) or that raised
anything but :class:`.pipeline.PolicyFault` is :class:`.base.WorkerCrashed` (logged with long
numbers redacted); a ``PolicyFault`` passes through unchanged. The first failing shard in
index order decides: later shards are cancelled, earlier ones finish. Stopping (abort), the
deadline and a shard's time limit cancel the running shards (``force=True``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.execution.base import (
    RolloutAborted,
    Shard,
    StackMismatch,
    WorkerCrashed,
    in_index_order,
    redacted,
    run_shard,
    stack_mismatch,
)
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayError, RayTaskError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:  # pragma: no cover - the driver is started only where Ray is
    raise ImportError("the Ray driver needs Ray: pip install 'ray==2.60.0'") from exc

from ale_robotics.evaluator.execution.ray_connection import THREAD_ENV
from ale_robotics.evaluator.execution.ray_driver import ShardJob
from ale_robotics.evaluator.execution.ray_process import unreachable
from ale_robotics.evaluator.execution.worker_process import warm_up

__all__ = ["ClusterLost", "Report", "ShardRun"]

log = logging.getLogger(__name__)

_POLL_S = 0.05
_HEARTBEAT_S = 1.0
_RPC_TIMEOUT_S = 30.0
"""How long the progress board may take to answer before the cluster counts as lost."""
_PROBE_S = 2.0
"""How long one wait for the board lasts before the GCS is probed."""
_CANCEL_WAIT_S = 1.5
"""How long a cancel waits for Ray to resolve the killed shards (see ``ShardRun._cancel``)."""

# ------------------------------------------------------------ in Ray workers --


class _ProgressBoard:
    """One per driver: shards post here, the driver takes the posts of its run."""

    def __init__(self) -> None:
        self._posts: dict[str, list[tuple[Any, ...]]] = {}

    def post(self, tag: str, message: tuple[Any, ...]) -> None:
        self._posts.setdefault(tag, []).append(message)

    def take(self, tag: str) -> list[tuple[Any, ...]]:
        return self._posts.pop(tag, [])

    def arrive(self, tag: str) -> int:
        """A warm-up's barrier: count one more arrival at ``tag``; the count so far."""
        self._posts.setdefault(tag, []).append(())
        return len(self._posts[tag])

    def arrivals(self, tag: str) -> int:
        return len(self._posts.get(tag, []))


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


def _warm_in_ray(board: Any, tag: str, n: int, task_json: str) -> tuple[int, str]:
    warm_up(task_json)
    # Held until all n warm-ups got this far (at most _WARM_HOLD_S), so that they overlap
    # and Ray gives each its own worker, not one quick worker all of them in turn.
    end = time.monotonic() + _WARM_HOLD_S
    count = ray.get(board.arrive.remote(tag))
    while count < n and time.monotonic() < end:
        time.sleep(0.05)
        count = ray.get(board.arrivals.remote(tag))
    return os.getpid(), ray.get_runtime_context().get_node_id()


_WARM_HOLD_S = 10.0
_WARM_WAIT_S = 30.0
"""The longest the driver waits for a warm-up: the evaluator counts a driver silent for 60 s
as lost, and a warm-up sends nothing until it ends."""


_warm_task: Any = ray.remote(max_retries=0)(_warm_in_ray)


# ------------------------------------------------------------------ driver --


class ClusterLost(WorkerCrashed):
    """The cluster itself stopped answering (not one worker): the driver is done with it."""


class Report(Protocol):
    """Where a run's news goes (the evaluator, over the driver's link)."""

    def started(self, pid: int, node: str) -> None: ...

    def progress(self, done: int) -> None: ...

    def heartbeat(self) -> None: ...


class ShardRun:
    """Runs jobs' shards on this process's Ray connection (one job at a time)."""

    def __init__(self, pinned: bool) -> None:
        self._pinned = pinned
        self.node: str = ray.get_runtime_context().get_node_id()
        self.gcs: str = ray.get_runtime_context().gcs_address
        self._board: Any = None

    def _get_board(self) -> Any:
        if self._board is None:
            here = NodeAffinitySchedulingStrategy(node_id=self.node, soft=False)
            self._board = _Board.options(scheduling_strategy=here).remote()
        return self._board

    def lose_board(self) -> None:
        board, self._board = self._board, None
        if board is not None:
            with contextlib.suppress(RayError):
                ray.kill(board)

    def _options(self, job: ShardJob | None, shard: int) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": 1, "name": f"ale-robotics shard {shard}"}
        if job is not None and job.shard_memory_bytes is not None:
            opts["memory"] = job.shard_memory_bytes
        if not self._pinned:  # shards and warm-ups alike: Ray pools workers by runtime env
            opts["runtime_env"] = {"env_vars": dict(THREAD_ENV)}
        return opts

    def warm(self, task_json: str, n: int) -> list[tuple[int, str]]:
        """Make the progress board and have ``n`` Ray workers do what a first shard of the
        task does first (:func:`.worker_process.warm_up`: imports, one env), so that a
        job's first shards start warm. Ray keeps idle workers and hands them the next
        tasks of the same runtime env: the shards. Waits at most ``_WARM_WAIT_S`` (warm-ups
        not done by then are cancelled, so that they hold no CPU a shard needs); returns the
        warmed workers' ``(pid, node)``."""
        board, tag = self._get_board(), f"warm-{uuid.uuid4().hex}"
        refs = [
            _warm_task.options(**self._options(None, i)).remote(board, tag, n, task_json)
            for i in range(n)
        ]
        try:
            warmed: list[tuple[int, str]] = ray.get(refs, timeout=_WARM_WAIT_S)
        except GetTimeoutError:
            log.warning("Ray workers still warming up after %.0f s: left cold", _WARM_WAIT_S)
            for ref in refs:
                with contextlib.suppress(RayError):
                    ray.cancel(ref)
            return []
        finally:
            board.take.remote(tag)  # the barrier's entries
        return warmed

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

    @staticmethod
    def _failure(exc: RayError) -> BaseException:
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
        """The board's posts of this run. While it does not answer, the cluster's GCS is
        probed every :data:`_PROBE_S`: one that refuses connections is a lost cluster at
        once (:class:`ClusterLost`), one that answers gets up to :data:`_RPC_TIMEOUT_S`."""
        ref = board.take.remote(tag)
        since = time.monotonic()
        while True:
            try:
                posts: list[tuple[Any, ...]] = ray.get(ref, timeout=_PROBE_S)
            except GetTimeoutError:
                down = unreachable(self.gcs, _PROBE_S)
                if down is None and time.monotonic() - since < _RPC_TIMEOUT_S:
                    continue
                self.lose_board()
                if down is not None:
                    raise ClusterLost(f"its GCS at {self.gcs} does not answer ({down})") from None
                log.error("the Ray progress board stopped answering for %gs", _RPC_TIMEOUT_S)
                raise ClusterLost(
                    f"it stopped answering for {_RPC_TIMEOUT_S:.0f}s (its GCS at {self.gcs} "
                    "still accepts connections)"
                ) from None
            except RayError as exc:
                self.lose_board()
                log.error("the Ray progress board failed: %s", redacted(exc))
                raise ClusterLost(f"its progress actor failed ({type(exc).__name__})") from None
            return posts

    def run(self, job: ShardJob, report: Report, stop: Callable[[], bool]) -> list[EpisodeOutcome]:
        """All of ``job``'s episodes in index order; ``stop()`` true: cancel, RolloutAborted."""
        tag = uuid.uuid4().hex
        board = self._get_board()
        try:
            weights_ref = ray.put(job.weights)
        except RayError as exc:
            raise WorkerCrashed(f"cannot store the weights in Ray ({type(exc).__name__})") from None
        state = _State(job)
        try:
            while True:
                while state.todo and len(state.running) < job.in_flight:
                    i = state.todo.popleft()
                    ref = _shard_task.options(**self._options(job, i)).remote(
                        board, tag, i, job.stack, job.task_json, weights_ref, job.shards[i]
                    )
                    state.running[ref] = i
                self._collect(state)
                self._read_board(state, board, tag, report)
                if time.monotonic() - state.beat > _HEARTBEAT_S:
                    state.beat = time.monotonic()
                    report.heartbeat()
                done = sum(state.counts)
                if done > state.reported and not state.failures:
                    state.reported = done
                    report.progress(done)
                if not state.running and not state.todo:
                    break
                if stop():
                    raise RolloutAborted("the rollouts were stopped")
                if job.deadline is not None and time.monotonic() > job.deadline:
                    raise TimeoutError("evaluation deadline passed")
                self._check_shard_times(job, state)
        except BaseException:
            self._cancel(list(state.running))
            raise
        if state.failures:
            raise state.failures[min(state.failures)]
        return in_index_order([state.results[i] for i in range(len(job.shards))])

    def _collect(self, state: _State) -> None:
        """Take the finished shards' results (in index order); a failure drops the later ones."""
        running = state.running
        if not running:
            return
        ready, _ = ray.wait(list(running), num_returns=len(running), timeout=_POLL_S)
        for ref in sorted(ready, key=running.__getitem__):  # in index order
            if ref not in running:  # dropped: after a shard that failed
                continue
            i = running.pop(ref)
            try:
                state.results[i] = ray.get(ref)
                state.counts[i] = len(state.job.shards[i])
            except RayError as exc:
                state.failures[i] = self._failure(exc)
                # shards after the first failing one cannot change the outcome
                for j in [j for j in state.todo if j > i]:
                    state.todo.remove(j)
                late = [r for r, j in running.items() if j > i]
                for r in late:
                    del running[r]
                self._cancel(late)

    def _read_board(self, state: _State, board: Any, tag: str, report: Report) -> None:
        for message in self._take(board, tag):
            kind, i = message[0], message[1]
            if kind == "start":
                state.started.setdefault(i, time.monotonic())
                report.started(int(message[2]), str(message[3]))
            elif i not in state.results:
                state.counts[i] = min(state.counts[i] + 1, len(state.job.shards[i]))

    @staticmethod
    def _check_shard_times(job: ShardJob, state: _State) -> None:
        if job.shard_timeout_s is None:
            return
        now = time.monotonic()
        for i in state.running.values():
            if i in state.started and now - state.started[i] > job.shard_timeout_s:
                log.error("rollout shard %d ran past its %gs limit", i, job.shard_timeout_s)
                raise WorkerCrashed(
                    f"a shard ran past its time limit of {job.shard_timeout_s:g}s on Ray"
                )


class _State:
    """One run's bookkeeping: shards to start, running, done, failed; episodes counted."""

    def __init__(self, job: ShardJob) -> None:
        self.job = job
        self.todo = deque(range(len(job.shards)))
        self.running: dict[Any, int] = {}
        self.results: dict[int, list[EpisodeOutcome]] = {}
        self.failures: dict[int, BaseException] = {}
        self.counts = [0] * len(job.shards)
        self.started: dict[int, float] = {}
        self.reported = 0
        self.beat = time.monotonic()
