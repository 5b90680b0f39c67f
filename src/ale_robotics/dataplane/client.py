"""The agent's end of a channel: write a request into shared memory, wait, read the answer.

:class:`ClientChannel` is what :class:`~ale_robotics.client.session.RemoteSession`
steps through once the evaluator offered a data plane (the SDK picks it, the agent's
code does not change). It connects to the data socket, sends its ticket, receives
the regions and eventfds, and maps the response region read-only (the seals forbid
anything else). A request it cannot express (an action of another shape or dtype,
more seeds than envs) is not sent here: the session sends that one over gRPC, whose
error is then exactly the evaluator's usual one.

Arrays it returns are copies: the next response overwrites the region.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.dataplane.layout import (
    CLOSED_OFFSET,
    FLAG_FLOAT64,
    OP_RESET,
    OP_STEP,
    REQUEST_HEAD,
    RESPONSE_HEAD,
    Layout,
)
from ale_robotics.dataplane.regions import Region, map_region
from ale_robotics.dataplane.wake import CLIENT_SPIN_S, Waiter, Wake, notify
from ale_robotics.dataplane.wire_infos import read_infos
from ale_robotics.errors import AleError, DeadlineExceededError, UnavailableError
from ale_robotics.infos import WireInfos

__all__ = ["BYE", "ChannelClosed", "ClientChannel", "Reply"]

BYE = b"bye"
"""What a client sends on the data socket before it closes it: a goodbye, not a death."""

_INT64 = (-(1 << 63), (1 << 63) - 1)


class ChannelClosed(UnavailableError):
    """The channel ended (the evaluator closed the session or stopped): use gRPC from now on.

    ``sent``: the request had left (it may have run); False: it never left, so it can be
    sent over gRPC instead."""

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True)
class Reply:
    """One answered request: fresh arrays (``rewards`` etc. None for a Reset)."""

    obs: npt.NDArray[Any]
    infos: WireInfos
    episodes_completed: int
    eval_complete: bool = False
    seeds_ignored: bool = False
    rewards: npt.NDArray[np.float64] | None = None
    terminated: npt.NDArray[np.bool_] | None = None
    truncated: npt.NDArray[np.bool_] | None = None


def _error(status: int, message: str) -> AleError:
    """The typed error of a status code, as :func:`ale_robotics.errors.from_rpc_error` makes it."""
    import grpc

    from ale_robotics.errors import error_for_code

    code = next((c for c in grpc.StatusCode if c.value[0] == status), grpc.StatusCode.UNKNOWN)
    cls = error_for_code(code)
    exc = cls(message or code.name)
    if cls is AleError:
        exc.code = code
    return exc


class ClientChannel:
    """One session's data plane on the client side (not thread-safe, as a session is not)."""

    def __init__(
        self, path: str, ticket: bytes, *, timeout_s: float, spin_s: float = CLIENT_SPIN_S
    ) -> None:
        self.pid = os.getpid()
        self.timeout_s = timeout_s
        self.closed = False
        self._regions: list[Region] = []
        self._fds: list[int] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            self._sock.settimeout(timeout_s)
            self._sock.connect(path)
            self._sock.sendall(ticket)
            msg, fds, _, _ = socket.recv_fds(self._sock, 64 * 1024, 4)
            self._fds = list(fds)
            answer = json.loads(msg or b"{}")
            if "error" in answer or len(fds) != 4:
                raise ChannelClosed(
                    f"the evaluator refused the data plane: {answer.get('error', 'no regions')}"
                )
            self.layout = lay = Layout.from_json(json.dumps(answer["layout"]))
            req_fd, resp_fd, self._req_efd, self._resp_efd = self._fds
            self._req = map_region(req_fd, writable=True)
            self._regions.append(self._req)
            self._fds.remove(req_fd)  # the region owns it now
            self._resp = map_region(resp_fd, writable=False)
            self._regions.append(self._resp)
            self._fds.remove(resp_fd)
            if self._req.size < lay.request_bytes or self._resp.size < lay.response_bytes:
                raise ChannelClosed("the data plane's regions are smaller than their layout")
            self._sock.settimeout(None)
        except BaseException:
            self._release()
            raise
        self._req_seq = self._req.view.cast("Q")
        self._resp_seq = self._resp.view.cast("Q")
        self._seq = int(self._req_seq[0])
        n = lay.num_envs
        self._action_shape = (n, *lay.action_shape)
        self._action_dtype = np.dtype(lay.action_dtype)
        req, resp = self._req.map, self._resp.map
        self._f64 = np.frombuffer(req, np.float64, lay.action_count, lay.action_offset)
        self._act = np.frombuffer(req, self._action_dtype, lay.action_count, lay.action_offset)
        self._act = self._act.reshape(self._action_shape)
        self._seeds = np.frombuffer(req, np.int64, n, lay.seeds_offset)
        self._mask = np.frombuffer(req, np.uint8, n, lay.mask_offset)
        obs_shape = (n, *lay.obs_shape)
        self._obs = np.frombuffer(resp, lay.obs_dtype, lay.obs_count, lay.obs_offset)
        self._obs = self._obs.reshape(obs_shape)
        self._reward = np.frombuffer(resp, np.float64, n, lay.reward_offset)
        self._term = np.frombuffer(resp, np.bool_, n, lay.terminated_offset)
        self._trunc = np.frombuffer(resp, np.bool_, n, lay.truncated_offset)
        self._info = self._resp.view[lay.info_offset :]
        self._waiter = Waiter(self._resp_seq, self._resp_efd, self._sock.fileno(), spin_s=spin_s)

    # -------------------------------------------------------------- requests --

    def fits_action(self, action: npt.NDArray[Any], float64_ok: bool) -> bool:
        """Whether ``action`` travels here as it is (else the session sends it over gRPC)."""
        return action.shape == self._action_shape and (
            action.dtype == self._action_dtype or (float64_ok and action.dtype == np.float64)
        )

    def fits_reset(self, seeds: list[int], mask: list[bool] | None) -> bool:
        n = self.layout.num_envs
        in_range = all(_INT64[0] <= s <= _INT64[1] for s in seeds)
        return in_range and len(seeds) <= n and (mask is None or len(mask) <= n)

    def step(self, action: npt.NDArray[Any]) -> Reply:
        """One Step (``action`` must :meth:`fit <fits_action>`); raises the evaluator's error."""
        if action.dtype == self._action_dtype:
            self._act[:] = action
            REQUEST_HEAD.pack_into(self._req.view, 8, OP_STEP, 0, 0, 0)
        else:
            self._f64[:] = action.reshape(-1)
            REQUEST_HEAD.pack_into(self._req.view, 8, OP_STEP, FLAG_FLOAT64, 0, 0)
        self._send()
        return self._receive(OP_STEP)

    def reset(self, seeds: list[int], mask: list[bool] | None) -> Reply:
        """One Reset (its arguments must :meth:`fit <fits_reset>`)."""
        self._seeds[: len(seeds)] = seeds
        nmask = 0 if mask is None else len(mask)
        if mask:
            self._mask[:nmask] = mask
        REQUEST_HEAD.pack_into(self._req.view, 8, OP_RESET, 0, len(seeds), nmask)
        self._send()
        return self._receive(OP_RESET)

    def _send(self) -> None:
        if self.closed:
            raise ChannelClosed("this data plane is closed")
        if self._resp.map[CLOSED_OFFSET]:
            self._end()
            raise ChannelClosed("the evaluator ended this data plane")
        self._seq += 1
        self._req_seq[0] = self._seq
        notify(self._req_efd)

    def _receive(self, op: int) -> Reply:
        while True:
            got = self._waiter.wait(self._seq - 1, self.timeout_s)
            if got is Wake.READY:
                break
            if got is Wake.TIMEOUT:
                self._end()
                raise DeadlineExceededError(
                    f"no answer on the data plane within {self.timeout_s:g}s (AleClient timeout_s)"
                )
            # PEER: the socket is readable: the evaluator closed it (it never sends otherwise)
            if self._resp_seq[0] == self._seq:
                break
            self._end()
            raise ChannelClosed(
                "the evaluator closed the data plane before answering (it stopped, or closed "
                "the session); whether the last request ran is unknown",
                sent=True,
            )
        if self._resp_seq[0] != self._seq:
            self._end()
            raise ChannelClosed(
                f"the data plane answered request {self._resp_seq[0]}, not {self._seq}", sent=True
            )
        status, _op, done, complete, ignored, closed, info_bytes = RESPONSE_HEAD.unpack_from(
            self._resp.view, 8
        )
        if status:
            message = bytes(self._info[:info_bytes]).decode(errors="replace")
            if closed:
                self._end()
            raise _error(status, message)
        infos = read_infos(self._info, self.layout.num_envs)
        if op == OP_STEP:
            return Reply(
                obs=self._obs.copy(),
                infos=infos,
                episodes_completed=done,
                eval_complete=bool(complete),
                rewards=self._reward.copy(),
                terminated=self._term.copy(),
                truncated=self._trunc.copy(),
            )
        return Reply(
            obs=self._obs.copy(), infos=infos, episodes_completed=done, seeds_ignored=bool(ignored)
        )

    # ---------------------------------------------------------------- close --

    def close(self) -> None:
        """Say goodbye and release everything (idempotent; never blocks). In a forked child
        it only releases: the goodbye is the parent's to say."""
        if self.closed:
            return
        if os.getpid() == self.pid:
            with contextlib.suppress(OSError):
                self._sock.send(BYE, socket.MSG_DONTWAIT)
        self._end()

    def _end(self) -> None:
        self.closed = True
        self._release()

    def _release(self) -> None:
        for attr in ("_f64", "_act", "_seeds", "_mask", "_obs", "_reward", "_term", "_trunc"):
            self.__dict__.pop(attr, None)
        for name in ("_req_seq", "_resp_seq", "_info"):
            view = self.__dict__.pop(name, None)
            if view is not None:
                view.release()
        for region in self._regions:
            region.close()
        for fd in self._fds:  # the eventfds, and whatever arrived but was not mapped
            with contextlib.suppress(OSError):
                os.close(fd)
        self._regions, self._fds = [], []
        with contextlib.suppress(OSError):
            self._sock.close()
