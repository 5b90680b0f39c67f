"""How a remote session ends when nobody closes its env.

Gymnasium code rarely closes its envs: the TD3 authors' ``main.py`` makes a new
eval env every ``eval_freq`` steps and drops it, and a crashed or killed script
closes nothing. Two mechanisms free such sessions on the evaluator promptly:

* **The process lives, the env was dropped** (garbage-collected): a
  ``weakref.finalize`` on the session hands its close to one daemon thread
  (:func:`abandon`). The finalizer itself never blocks and sends nothing: it may
  run inside the garbage collector, on any thread, gRPC's own included, where a
  blocking call could deadlock. At interpreter exit an ``atexit`` hook closes
  whatever is still open, all sessions in parallel and for at most
  :data:`EXIT_WAIT_S` in total. Once the interpreter is finalizing
  (``sys.is_finalizing()``: daemon threads no longer run, and gRPC's
  ``channel.close()`` waits for them forever) nothing is sent at all.
* **The process is gone** (crashed, SIGKILL, lost its connection): the
  evaluator closes the sessions whose ``WatchSessions`` stream broke, a couple
  of seconds later (:class:`SessionWatch`; one stream per process and
  evaluator, not per session, so a server thread per agent, not per env).

An evaluator without ``WatchSessions`` (older ones) still reaps idle sessions
after ``session_idle_timeout_s``; the watch then simply stays off.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from ale_robotics.client.sdk import AleClient
    from ale_robotics.client.stream import StepStream
    from ale_robotics.dataplane.client import ClientChannel

__all__ = ["EXIT_WAIT_S", "SessionLifetime", "SessionWatch", "abandon", "watch_for"]

log = logging.getLogger(__name__)

EXIT_WAIT_S = 2.0
"""At interpreter exit, how long the CloseSession calls of sessions left open may take,
all together (an eval session's close completes its episodes on the evaluator, which can
take longer: the evaluator finishes it anyway)."""

ACK_WAIT_S = 1.0
"""How long opening a session waits for the watch to confirm it (it never fails for it)."""

_CLOSE_TIMEOUT_S = 10.0

_lock = threading.Lock()
_open: set[SessionLifetime] = set()
_closer: queue.SimpleQueue[SessionLifetime] = queue.SimpleQueue()  # reentrant: safe in GC
_closer_started = False


@dataclass(eq=False)
class SessionLifetime:
    """What it takes to close one session, without the session (or its env) itself.

    :class:`~ale_robotics.client.session.RemoteSession` keeps its current step
    stream here, so that a finalizer holding only this object can end it too.
    """

    client: AleClient
    session_id: str
    own_client: bool
    watch: SessionWatch | None = None
    stream: StepStream | None = None
    channel: ClientChannel | None = None
    """The session's shared-memory data plane, while it has one."""
    closed: bool = False
    pid: int = field(default_factory=os.getpid)
    """The process that opened it: a forked child (multiprocessing, DataLoader workers)
    inherits the object, never the session, and must not close it at its exit or GC."""
    _mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        with _lock:
            _open.add(self)

    def begin(self) -> bool:
        """Mark closed (idempotent); True for the one caller that gets to close it."""
        with self._mutex:
            if self.closed:
                return False
            self.closed = True
        with _lock:
            _open.discard(self)
        return True

    def release_local(self) -> None:
        """End the step stream, the data plane and the watch entry (all local, none blocks)."""
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.watch is not None:
            self.watch.detach(self.session_id)

    def close_client(self) -> None:
        if self.own_client and not sys.is_finalizing():
            self.client.close()


def abandon(life: SessionLifetime) -> None:
    """The session's env was dropped: close it from the closer thread. Never blocks."""
    global _closer_started
    if life.closed or sys.is_finalizing() or life.pid != os.getpid():
        return
    _closer.put(life)
    if not _closer_started:
        with _lock:
            if not _closer_started:
                _closer_started = True
                threading.Thread(target=_close_loop, name="ale-session-closer", daemon=True).start()


def _close_quietly(life: SessionLifetime) -> None:
    """CloseSession for a dropped env; failures only logged (nobody is left to tell)."""
    if not life.begin():
        return
    life.release_local()
    try:
        life.client.stub.CloseSession(
            pb.CloseSessionRequest(session_id=life.session_id),
            metadata=life.client.metadata,
            timeout=min(life.client.timeout_s, _CLOSE_TIMEOUT_S),
        )
        log.info("closed session %s of a dropped env", life.session_id)
    except (grpc.RpcError, ValueError) as exc:  # ValueError: its channel was closed
        log.info("could not close session %s of a dropped env: %s", life.session_id, exc)
    life.close_client()


def _close_loop() -> None:
    while True:
        life = _closer.get()
        try:
            _close_quietly(life)
        except Exception:  # the loop must survive one bad close; logged, not silent
            log.exception("closing session %s failed", life.session_id)


@atexit.register
def _close_at_exit() -> None:
    """Close every session still open, in parallel, for at most :data:`EXIT_WAIT_S`."""
    with _lock:
        lives = [life for life in _open if life.pid == os.getpid()]
    pending: list[tuple[SessionLifetime, Any]] = []
    for life in lives:
        if not life.begin():
            continue
        life.release_local()
        try:
            future = life.client.stub.CloseSession.future(
                pb.CloseSessionRequest(session_id=life.session_id),
                metadata=life.client.metadata,
                timeout=EXIT_WAIT_S,
            )
        except ValueError:  # its channel is closed already
            continue
        pending.append((life, future))
    deadline = time.monotonic() + EXIT_WAIT_S
    for life, future in pending:
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        except (grpc.RpcError, grpc.FutureTimeoutError) as exc:
            log.info("session %s left open at exit: %s", life.session_id, exc)


# ------------------------------------------------------------------ watch --

_watches: dict[tuple[int, str, tuple[tuple[str, str], ...]], SessionWatch] = {}


def watch_for(client: AleClient) -> SessionWatch:
    """This process's watch of ``client``'s evaluator and token (created on first use)."""
    key = (os.getpid(), client.endpoint, client.metadata)  # a forked child makes its own
    with _lock:
        watch = _watches.get(key)
        if watch is None or (watch.stopped and not watch.off_reason):
            watch = _watches[key] = SessionWatch(client.endpoint, client.metadata, key)
        return watch


class SessionWatch:
    """One ``WatchSessions`` stream naming every session this process holds on an evaluator.

    It has its own channel (an env may close its client while others still use
    the watch), reconnects after an error and names its sessions again, and
    half-closes once its last session is detached. An evaluator that does not
    offer the RPC (UNIMPLEMENTED) turns it off for good.
    """

    def __init__(self, endpoint: str, metadata: tuple[tuple[str, str], ...], key: Any) -> None:
        self._metadata = metadata
        self._key = key
        self._channel = grpc.insecure_channel(endpoint)
        self._stub = pb_grpc.AleEnvStub(self._channel)
        self._ids: set[str] = set()
        self._requests: queue.SimpleQueue[pb.WatchSessionsRequest | None] | None = None
        self._acks: collections.deque[threading.Event] = collections.deque()
        self._call: Any = None
        self._hello = threading.Event()  # acks the first request of the next connection
        self.stopped = False
        self.off_reason = ""
        """Why this evaluator's sessions go unwatched ("" while the watch works)."""
        self.grace_s: float | None = None
        """The evaluator's grace for a broken watch, once it answered."""
        self._thread = threading.Thread(target=self._run, name="ale-session-watch", daemon=True)
        self._thread.start()

    @property
    def watching(self) -> frozenset[str]:
        with _lock:
            return frozenset(self._ids)

    def attach(self, session_id: str, wait_s: float = ACK_WAIT_S) -> bool:
        """Watch ``session_id``, waiting up to ``wait_s`` for the evaluator to answer; False
        when this watch has stopped meanwhile (its last session closed: take a new one).

        Never fails otherwise: an evaluator that cannot watch still reaps idle sessions.
        """
        with _lock:
            if self.stopped:
                return bool(self.off_reason)  # off for good: nothing better to take
            self._ids.add(session_id)
            if self._requests is None:
                ack = self._hello  # (re)connecting: the new stream names it first thing
            else:
                ack = threading.Event()
                self._acks.append(ack)
                self._requests.put(pb.WatchSessionsRequest(session_ids=[session_id]))
        ack.wait(wait_s)
        return True

    def detach(self, session_id: str) -> None:
        """Stop watching ``session_id`` (closed); the last one ends the stream cleanly."""
        with _lock:
            self._ids.discard(session_id)
            if self._ids or self.stopped:
                return
            self.stopped = True
            if _watches.get(self._key) is self:
                del _watches[self._key]
            if self._requests is not None:
                self._requests.put(None)  # half-close: every session it named is closed already

    def _run(self) -> None:
        backoff = 0.2
        while True:
            requests: queue.SimpleQueue[pb.WatchSessionsRequest | None] = queue.SimpleQueue()
            with _lock:
                if self.stopped:
                    break
                for ack in self._acks:
                    ack.set()  # a lost stream's waiters: stop waiting
                self._acks.clear()
                self._requests = requests
                hello, self._hello = self._hello, threading.Event()
                if self._ids:
                    self._acks.append(hello)
                    requests.put(pb.WatchSessionsRequest(session_ids=sorted(self._ids)))
                else:
                    hello.set()
            try:
                self._call = self._stub.WatchSessions(
                    iter(requests.get, None), metadata=self._metadata
                )
                for response in self._call:
                    self.grace_s = response.grace_s
                    backoff = 0.2
                    with _lock:
                        if self._acks:
                            self._acks.popleft().set()
            except grpc.RpcError as err:
                code = err.code()
                if code is grpc.StatusCode.UNIMPLEMENTED:
                    self._off(f"the evaluator does not offer WatchSessions ({err.details()})")
                    break
                if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
                    backoff = 5.0  # no stream slot now: sessions are reaped when idle meanwhile
                log.debug("session watch ended (%s); reconnecting in %gs", code, backoff)
            with _lock:
                self._requests = None
                if self.stopped:
                    break
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
        with _lock:
            for ack in (*self._acks, self._hello):
                ack.set()
            self._acks.clear()
        if not sys.is_finalizing():
            self._channel.close()

    def _off(self, reason: str) -> None:
        log.info("%s: sessions of this process are closed only when idle", reason)
        with _lock:
            self.off_reason = reason  # kept in _watches: this evaluator is not asked again
            self.stopped = True
            self._ids.clear()
