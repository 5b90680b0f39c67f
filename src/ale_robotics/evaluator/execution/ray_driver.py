"""The Ray driver: a child process of the evaluator that holds its Ray connection.

Why a process of its own: Ray's core worker ends the process it lives in when it loses
its cluster (a fatal check, "connection to the plasma store is failed. Terminate the
process"): with ``ray.init`` in the evaluator, a stopped cluster took the evaluator down
with it, mid-job, with no result and no closing event. Here only this process dies; the
evaluator (:class:`.ray.RayExecutor`) sees its link close, fails the job as an
infrastructure failure naming the lost cluster, and starts a fresh driver for the next.

The link is a socket pair (:class:`multiprocessing.connection.Connection`, pickled
messages). The evaluator sends ``("connect", address, num_cpus, object_store_bytes)``
once, then ``("run", ShardJob)`` per job (``("warm", task_json, n)`` to warm ``n``
workers up for a job to come, answered as a run with no outcomes) and ``("abort",)`` to
stop one; the driver answers ``("ready", {...})`` or ``("unavailable", why)``, and per
run ``("started", pid, node)``, ``("progress", n)``, ``("beat",)`` and ``("log", level,
logger, text)`` until one of ``("done", outcomes)``, ``("fault", PolicyFault)``,
``("crashed", why)`` (a worker), ``("lost", why)`` (the cluster: the evaluator replaces
this driver), ``("timeout", why)`` or ``("aborted",)``.

It dies with the evaluator: the link closing (the evaluator exited, or was killed) ends
it with a Ray shutdown, and a thread that sees it re-parented ends it at once (when the
main thread is stuck inside Ray). A private local Ray instance's processes were started
by this process's main thread with Ray's kernel fate sharing (``PR_SET_PDEATHSIG``), and
the driver SIGKILLs its descendants before it ends, whichever way it ends: a raylet's
agents notice their raylet's death late, past 30 s on a loaded host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.execution.base import (
    ExecutorUnavailable,
    RolloutAborted,
    Shard,
    WorkerCrashed,
    redacted,
    stack_versions,
)
from ale_robotics.model.episode import PolicyFault

__all__ = ["ShardJob", "main"]

log = logging.getLogger(__name__)

_PARENT_POLL_S = 0.5


@dataclass(frozen=True)
class ShardJob:
    """One run, as the evaluator sends it: the task (as JSON), the weights, the shards
    (:func:`.base.shard_layout`), the evaluator's package stack (each shard checks its
    own against it), and the limits (``deadline`` is a ``time.monotonic()`` value: one
    clock for every process of the host)."""

    task_json: str
    weights: dict[str, npt.NDArray[np.floating]]
    shards: list[Shard]
    stack: dict[str, str]
    in_flight: int
    deadline: float | None
    shard_timeout_s: float | None
    shard_memory_bytes: int | None


class _Link:
    """The driver's end of the link; every send from the main thread (or the log handler,
    which the main thread's code calls)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.stopped = False
        self.gone = False

    def send(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            try:
                self.conn.send(message)
            except OSError:  # the evaluator is gone: the main loop ends on its next read
                self.gone = True

    def stop_requested(self) -> bool:
        """Whether the evaluator asked to stop the run (or is gone); never blocks."""
        while not self.stopped and not self.gone and self.conn.poll():
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                self.gone = True
                break
            if message[0] == "abort":
                self.stopped = True
        return self.stopped or self.gone

    # the Report protocol of :mod:`.ray_shards`
    def started(self, pid: int, node: str) -> None:
        self.send(("started", pid, node))

    def progress(self, done: int) -> None:
        self.send(("progress", done))

    def heartbeat(self) -> None:
        self.send(("beat",))


class _LinkLog(logging.Handler):
    """The driver's log records, passed to the evaluator's loggers of the same names."""

    def __init__(self, link: _Link) -> None:
        super().__init__(logging.INFO)
        self.link = link

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.link.send(("log", record.levelno, record.name, record.getMessage()))


def _descendants() -> list[int]:
    """This process's descendants, from /proc (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_descendants() -> None:
    """SIGKILL every process this one started, and theirs: a private Ray instance (raylet,
    GCS, its agents and workers). Ray's own fate sharing takes them too, but its agents
    notice their raylet's death late (past 30 s on a loaded host), and an evaluator that
    died must leave nothing behind."""
    for pid in _descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _watch_parent(parent: int) -> None:
    """End this process once its parent is gone (re-parented), even while the main thread
    is stuck inside Ray, killing what it started first (:func:`_kill_descendants`)."""

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(_PARENT_POLL_S)
        _kill_descendants()
        os._exit(3)

    threading.Thread(target=watch, name="ray-driver-parent-watch", daemon=True).start()


def _serve_run(link: _Link, shards: Any, job: ShardJob) -> None:
    from ale_robotics.evaluator.execution.ray_shards import ClusterLost

    link.stopped = False
    try:
        outcomes = shards.run(job, link, link.stop_requested)
    except PolicyFault as exc:
        link.send(("fault", exc))
    except ClusterLost as exc:
        link.send(("lost", str(exc)))
    except WorkerCrashed as exc:
        link.send(("crashed", str(exc)))
    except TimeoutError as exc:
        link.send(("timeout", str(exc)))
    except RolloutAborted:
        link.send(("aborted",))
    except Exception as exc:  # any other failure is the infrastructure's
        log.exception("the Ray driver failed")
        link.send(("crashed", f"the Ray driver failed ({type(exc).__name__})"))
    else:
        link.send(("done", outcomes))


def _serve_warm(link: _Link, shards: Any, task_json: str, n: int) -> None:
    """Warm ``n`` workers up for the task (:meth:`.ray_shards.ShardRun.warm`); best effort:
    a failure is logged, and answered as done (the first shard then starts cold)."""
    from ale_robotics.evaluator.execution.ray_shards import ClusterLost

    try:
        for pid, node in shards.warm(task_json, n):
            link.started(pid, node)  # the evaluator knows them as it knows shards' workers
    except ClusterLost as exc:
        link.send(("lost", str(exc)))
        return
    except Exception as exc:
        log.warning("warming Ray workers up failed: %s", redacted(exc))
    link.send(("done", []))


def _connect(link: _Link, hello: tuple[Any, ...]) -> Any:
    """Join Ray as the evaluator asks; the driver's :class:`.ray_shards.ShardRun`, or None
    (the evaluator was told why)."""
    _, address, num_cpus, object_store_bytes = hello
    from ale_robotics.evaluator.execution.ray_connection import connect

    try:
        pinned = connect(address, num_cpus, object_store_bytes)
    except ExecutorUnavailable as exc:
        link.send(("unavailable", str(exc)))
        return None
    import ray

    from ale_robotics.evaluator.execution.ray_shards import ShardRun

    shards = ShardRun(pinned)
    cpus: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    link.send(
        (
            "ready",
            {
                "cpus": max(1, int(cpus.get("CPU", 1))),
                "address": ray.get_runtime_context().gcs_address,
                "node": shards.node,
                "pid": os.getpid(),
                "stack": stack_versions(),
            },
        )
    )
    return shards


def main() -> None:
    """The driver process: ``python -c '...main()' FD``, FD its end of the link."""
    _watch_parent(os.getppid())
    # the evaluator stops on its own terms (a terminal's Ctrl-C is its, then it ends us)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    link = _Link(Connection(int(sys.argv[1])))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("ale_robotics").addHandler(_LinkLog(link))
    logging.getLogger("ale_robotics").propagate = False
    try:
        hello = link.conn.recv()
    except (EOFError, OSError):
        return
    shards = _connect(link, hello)
    if shards is None:
        return
    from ale_robotics.evaluator.execution.ray_connection import disconnect

    try:
        while not link.gone:
            try:
                message = link.conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "run":
                _serve_run(link, shards, message[1])
            elif message[0] == "warm":
                _serve_warm(link, shards, message[1], message[2])
            # a late ("abort",), after its run ended, needs nothing
    finally:
        shards.lose_board()
        disconnect()
        _kill_descendants()  # whatever Ray's shutdown left of a private instance
