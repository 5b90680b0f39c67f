"""One session's shared-memory channel on the evaluator's side: a thread serving its requests.

Each request is taken out of shared memory once (:meth:`ServerChannel._take`: one
copy of the request region into private bytes, then every field is read from the
copy), then run exactly as the Step or Reset call of the servicer runs it: through
:meth:`SessionManager.call` (the session's lock, its deadline rules, its run's
visibility, the metrics' step count) and :meth:`Session.step` / :meth:`Session.reset`
(every check, budget, eval record and trajectory event). The answer is written into
the response region under the session's lock, then published by its sequence
number. An :class:`~ale_robotics.errors.AleError` is answered as its status code and
message, as gRPC would; anything else is a bug, logged, and answered INTERNAL.

The channel ends when:

* the client says goodbye (:data:`~ale_robotics.dataplane.client.BYE`) and closes;
* the data socket closes without one: the client process is gone, so the session is
  orphaned (:meth:`SessionManager.orphan`: closed after the same grace as a broken
  WatchSessions stream, unless the client comes back);
* the session was closed (CloseSession, a reap, CloseRun), seen within about a second;
* the evaluator stops (:meth:`ServerChannel.stop`);
* the request breaks the channel's protocol (a sequence number out of order, an
  unknown operation or flag, counts past the session's size, the eventfd written
  again and again with no request): the answer says so, the channel ends and the
  session is closed, as a CloseSession would (an eval session's episodes left are
  played with the null action and recorded). Only a hostile or broken client does
  that; the SDK never does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ale_robotics.dataplane.client import BYE
from ale_robotics.dataplane.layout import (
    CLOSED_OFFSET,
    FLAG_FLOAT64,
    OP_RESET,
    OP_STEP,
    OPS,
    REQUEST_HEAD,
    RESPONSE_HEAD,
    Layout,
)
from ale_robotics.dataplane.regions import Region, eventfd, new_region
from ale_robotics.dataplane.wake import Waiter, Wake, notify
from ale_robotics.dataplane.wire_infos import InfoOverflow, write_infos
from ale_robotics.errors import AleError, ResourceExhaustedError
from ale_robotics.evaluator.runs.registry import Scope
from ale_robotics.evaluator.sessions.types import Batch

if TYPE_CHECKING:
    from ale_robotics.evaluator.sessions.manager import SessionManager
    from ale_robotics.evaluator.sessions.vector import Session

__all__ = ["ServerChannel"]

log = logging.getLogger(__name__)

PARK_AFTER_S = 0.5
"""A channel with no request for this long gives its thread back and waits, parked, on the
data plane's one poller (``.dataplane``): an open, idle session holds no thread of its own."""

MAX_SPURIOUS = 1000
"""Wake-ups in a row without a request after which the client is breaking the protocol."""

_INTERNAL = 13  # grpc.StatusCode.INTERNAL
_INVALID_ARGUMENT = 3


class ProtocolViolation(Exception):
    """The client broke the channel's protocol; the message says how."""


class ServerChannel:
    """Serves one session's requests from its regions until the channel ends (module doc)."""

    def __init__(
        self,
        sessions: SessionManager,
        session: Session,
        scope: Scope,
        conn: socket.socket,
        max_response_bytes: int,
        on_end: Callable[[ServerChannel], None],
        park: Callable[[ServerChannel], None],
    ) -> None:
        self.session_id = session.id
        self._park = park
        self._sessions = sessions
        self._session = session
        self._scope = scope
        self._conn = conn
        self._on_end = on_end
        self.layout = lay = Layout.build(
            session.num_envs,
            session.observation_shape,
            session.observation_dtype,
            session.action_shape[1:],
            session.action_dtype,
            max_response_bytes,
        )
        self._regions: list[Region] = []
        self._fds: list[int] = []
        try:
            self._req = new_region(
                f"ale-req-{session.id[:13]}", lay.request_bytes, peer_writable=True
            )
            self._regions.append(self._req)
            self._resp = new_region(
                f"ale-resp-{session.id[:13]}", lay.response_bytes, peer_writable=False
            )
            self._regions.append(self._resp)
            self._req_efd, self._resp_efd, self._stop_fd = eventfd(), eventfd(), eventfd()
            self._fds += [self._req_efd, self._resp_efd, self._stop_fd]
        except BaseException:
            self._release()
            raise
        n = lay.num_envs
        resp = self._resp.map
        self._req_seq = self._req.view.cast("Q")
        self._resp_seq = self._resp.view.cast("Q")
        self._obs = np.frombuffer(resp, lay.obs_dtype, lay.obs_count, lay.obs_offset)
        self._obs = self._obs.reshape(n, *lay.obs_shape)
        self._reward = np.frombuffer(resp, np.float64, n, lay.reward_offset)
        self._term = np.frombuffer(resp, np.bool_, n, lay.terminated_offset)
        self._trunc = np.frombuffer(resp, np.bool_, n, lay.truncated_offset)
        self._info = self._resp.view[lay.info_offset :]
        self._action_shape = session.action_shape
        self._action_dtype = session.action_dtype
        self._request_used = lay.mask_offset + lay.num_envs
        self._last = 0
        self._done = threading.Event()
        self._waiter = Waiter(
            self._req_seq,
            self._req_efd,
            self._conn.fileno(),
            self._stop_fd,
            max_spurious=MAX_SPURIOUS,
        )

    def hand_over(self) -> None:
        """Send the regions and eventfds to the client (then :meth:`serve` answers it)."""
        hello = json.dumps({"layout": json.loads(self.layout.to_json())}).encode()
        fds = [self._req.fd, self._resp.fd, self._req_efd, self._resp_efd]
        try:
            socket.send_fds(self._conn, [hello], fds)
        except OSError:
            self._end("the client left during the handshake")
            raise

    def serve(self) -> None:
        """Serve requests in the calling thread (the one that took the handshake) until the
        channel ends or parks."""
        threading.current_thread().name = f"ale-shm-{self.session_id[5:13]}"
        self._run()

    @property
    def wake_fds(self) -> tuple[int, int, int]:
        """What wakes a parked channel: a request, the client's end, a stop."""
        return self._req_efd, self._conn.fileno(), self._stop_fd

    @property
    def session_closed(self) -> bool:
        return self._session.closed

    def resume(self) -> None:
        """Serve again on a thread of its own (called by the poller it was parked on)."""
        threading.Thread(
            target=self._run, name=f"ale-shm-{self.session_id[5:13]}", daemon=True
        ).start()

    def stop(self) -> None:
        """End the channel from outside (the evaluator stops, or a newer channel replaces it)."""
        notify(self._stop_fd)

    def join(self, timeout: float) -> None:
        self._done.wait(timeout)

    # ---------------------------------------------------------------- serve --

    def _run(self) -> None:
        why = ""
        parked = False
        try:
            while True:
                if self._session.closed:
                    why = "the session was closed"
                    break
                got = self._waiter.wait(self._last, PARK_AFTER_S)
                if got is Wake.READY:
                    self._serve_one()
                elif got is Wake.TIMEOUT:
                    parked = True  # idle: give the thread back
                    break
                elif got is Wake.STOP:
                    why = "the evaluator ended the data plane"
                    break
                elif got is Wake.NOISE:
                    raise ProtocolViolation(
                        f"its eventfd was written {MAX_SPURIOUS} times with no request"
                    )
                else:
                    why = self._peer()
                    break
        except ProtocolViolation as exc:
            parked = False
            self._violation(str(exc))
        except Exception:  # a bug here must not take the evaluator down: logged, channel over
            parked = False
            log.exception("session %s: the data plane failed", self.session_id)
        finally:
            if parked:
                self._park(self)
            else:
                self._end(why)

    def _peer(self) -> str:
        """The data socket is readable: a goodbye, or the client's death (or garbage)."""
        try:
            data = self._conn.recv(64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return ""
        except OSError:
            data = b""
        if data == BYE:
            return "the client closed it"
        if data:
            raise ProtocolViolation(f"{len(data)} unexpected bytes on the data socket")
        self._sessions.orphan(self.session_id)
        return "the client went away"

    def _take(self) -> tuple[int, bytes]:
        """Copy the request out of shared memory, once; the copy's seq and the copy."""
        raw = self._req.map[: self._request_used]  # the one read of the request
        return int.from_bytes(raw[:8], "little"), raw

    def _serve_one(self) -> None:
        seq, raw = self._take()
        if seq != self._last + 1:
            raise ProtocolViolation(
                f"request number {seq} after {self._last}: requests are numbered 1, 2, ... "
                "and sent one at a time"
            )
        lay = self.layout
        op, flags, nseeds, nmask = REQUEST_HEAD.unpack_from(raw, 8)
        if op not in OPS or flags & ~FLAG_FLOAT64 or (op == OP_RESET and flags):
            raise ProtocolViolation(f"unknown operation {op} or flags {flags:#x}")
        if op == OP_STEP and (nseeds or nmask):
            raise ProtocolViolation("a Step request carries no seeds or mask")
        if nseeds > lay.num_envs or nmask > lay.num_envs:
            raise ProtocolViolation(
                f"{nseeds} seeds and {nmask} mask entries for {lay.num_envs} envs"
            )
        run: Callable[[Session], None]
        if op == OP_STEP:
            dtype = np.dtype(np.float64) if flags & FLAG_FLOAT64 else self._action_dtype
            action = np.frombuffer(raw, dtype, lay.action_count, lay.action_offset)
            action = action.reshape(self._action_shape)

            def run(session: Session) -> None:
                self._write(OP_STEP, session.step(action))

        else:
            seeds = [int(s) for s in np.frombuffer(raw, np.int64, nseeds, lay.seeds_offset)]
            mask = [b != 0 for b in raw[lay.mask_offset : lay.mask_offset + nmask]]

            def run(session: Session) -> None:
                self._write(OP_RESET, session.reset(seeds, mask))

        try:
            self._sessions.call(self.session_id, None, run, self._scope)
        except AleError as exc:
            self._write_error(op, exc.code.value[0], exc.message)
        except Exception:
            log.exception("bug in a data-plane %s", "Step" if op == OP_STEP else "Reset")
            self._write_error(op, _INTERNAL, "internal evaluator error (logged)")
        self._publish(seq)

    def _write(self, op: int, batch: Batch) -> None:
        """The answer of a Step or Reset, into the response region (under the session lock:
        ``batch.obs`` is the session's own array)."""
        np.copyto(self._obs, batch.obs)
        if op == OP_STEP:
            assert batch.rewards is not None
            assert batch.terminated is not None and batch.truncated is not None
            self._reward[:] = batch.rewards
            self._term[:] = batch.terminated
            self._trunc[:] = batch.truncated
        try:
            info_bytes = write_infos(self._info, batch.infos)
        except InfoOverflow as exc:
            raise ResourceExhaustedError(
                f"the infos of this call take {exc.needed} bytes, over the {exc.capacity} bytes "
                "the data plane has for them (the listener's max_message_bytes, as for a gRPC "
                "response): return smaller infos"
            ) from None
        RESPONSE_HEAD.pack_into(
            self._resp.view,
            8,
            0,
            op,
            batch.episodes_completed,
            batch.eval_complete,
            batch.seeds_ignored,
            0,
            info_bytes,
        )

    def _write_error(self, op: int, status: int, message: str, closed: bool = False) -> None:
        text = message.encode()[: self.layout.info_capacity]
        self._info[: len(text)] = text
        RESPONSE_HEAD.pack_into(self._resp.view, 8, status, op, 0, 0, 0, closed, len(text))

    def _publish(self, seq: int) -> None:
        self._last = seq
        self._resp_seq[0] = seq  # last: the answer is complete before its number shows
        notify(self._resp_efd)

    def _violation(self, what: str) -> None:
        message = (
            f"the data plane's request broke its protocol ({what}); the channel and session "
            f"{self.session_id} are closed"
        )
        log.warning("session %s: %s", self.session_id, message)
        self._resp.map[CLOSED_OFFSET] = 1
        self._write_error(0, _INVALID_ARGUMENT, message, closed=True)
        self._publish(self._last + 1)
        with contextlib.suppress(AleError):
            self._sessions.close(self.session_id, self._scope, why=f"its data plane: {what}")

    # ---------------------------------------------------------------- close --

    def _end(self, why: str) -> None:
        if why:
            log.info("session %s: data plane ended (%s)", self.session_id, why)
        with contextlib.suppress(ValueError):
            self._resp.map[CLOSED_OFFSET] = 1
        with contextlib.suppress(OSError):
            self._conn.close()
        self._release()
        self._on_end(self)
        self._done.set()

    def _release(self) -> None:
        for attr in ("_obs", "_reward", "_term", "_trunc"):
            self.__dict__.pop(attr, None)
        for name in ("_req_seq", "_resp_seq", "_info"):
            view = self.__dict__.pop(name, None)
            if view is not None:
                view.release()
        for region in self._regions:
            region.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._regions, self._fds = [], []
