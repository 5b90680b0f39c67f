"""A remote session as numpy: OpenSession, Reset, Step, CloseSession over an :class:`AleClient`.

This is the one place that speaks the session protocol on the client side;
:class:`~ale_robotics.client.remote_env.RemoteEnv` and ``RemoteVectorEnv`` only
adapt it to Gymnasium's two APIs. Connection, token metadata and the mapping of
status codes to :mod:`ale_robotics.errors` are :class:`AleClient`'s. Step is
never retried: it is not idempotent.

A session nobody closes is closed all the same (:mod:`.lifetime`): dropped, it
is closed from a background thread; left open at exit, by an ``atexit`` hook;
its process killed, by the evaluator once its watch stream breaks.

**Transports.** Step and Reset go through shared memory when the evaluator offers
it (the ``shm_data_plane`` capability: an agent listener on a Unix socket, so a
client on the same host; :mod:`ale_robotics.dataplane`), else over one
``StepStream`` call (Reset as a unary call), else as unary calls. ``transport``
"any" (the default) picks the first the evaluator offers; ``ALE_TRANSPORT=grpc``
in the environment forces gRPC whatever the code asks, ``ALE_TRANSPORT=shm``
requires shared memory (an error names why it cannot be had). The results are
the same bit for bit whichever carries them: the evaluator runs the same Step.
"""

from __future__ import annotations

import logging
import os
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from ale_robotics.client.lifetime import SessionLifetime, abandon, watch_for
from ale_robotics.client.sdk import AleClient, TaskView
from ale_robotics.client.spaces import space_from_spec
from ale_robotics.client.stream import StepStream
from ale_robotics.dataplane.client import ChannelClosed, ClientChannel, Reply
from ale_robotics.dataplane.layout import LAYOUT_VERSION
from ale_robotics.errors import (
    AleError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
    UnimplementedError,
)
from ale_robotics.infos import WireInfos, decode_infos
from ale_robotics.tensors import from_tensor, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["RemoteSession", "SessionStep", "StepTransport"]

log = logging.getLogger(__name__)

SessionKindName = Literal["practice", "eval"]
StepTransport = Literal["any", "shm", "stream", "unary"]
TRANSPORT_VAR = "ALE_TRANSPORT"
"""``grpc`` forces gRPC (a stream, or unary calls where asked); ``shm`` requires the data
plane; ``any`` or unset: the code's choice (see the module docstring)."""
_TRANSPORTS: tuple[StepTransport, ...] = ("any", "shm", "stream", "unary")
_PICK = _TRANSPORTS[0]
"""The default: shared memory where offered, else the stream."""
_TRANSPORT_VALUES = ("any", "grpc", "shm")
_KINDS = {"practice": pb.SESSION_KIND_PRACTICE, "eval": pb.SESSION_KIND_EVAL}

T = TypeVar("T")


@dataclass(frozen=True)
class SessionStep:
    """One Step of every env of the session (arrays are fresh and writable).

    ``wire_infos`` holds the infos as they travelled; :attr:`infos` (one dict
    per env) is built only when asked for, since a vector env wants them in
    Gymnasium's columnar layout instead (``wire_infos.vector``).
    """

    obs: npt.NDArray[Any]
    rewards: npt.NDArray[np.float64]
    terminated: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]
    wire_infos: WireInfos = field(repr=False)

    @property
    def infos(self) -> list[dict[str, Any]]:
        """One info dict per env."""
        return self.wire_infos.per_env()


def _check_arguments(kind: str, num_envs: Any, transport: str, render_mode: str | None) -> str:
    """INVALID_ARGUMENT for a bad argument of a session; else which transport it wants:
    "shm" (required), "any" or "grpc" (``ALE_TRANSPORT`` first, then ``transport``)."""
    if kind not in _KINDS:
        raise InvalidArgumentError(f"kind must be 'practice' or 'eval', not {kind!r}")
    if transport not in _TRANSPORTS:
        raise InvalidArgumentError(
            f"transport must be 'any', 'shm', 'stream' or 'unary', not {transport!r}"
        )
    forced = _forced_transport()
    if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
        raise InvalidArgumentError(f"num_envs must be an int, not {num_envs!r}")
    if num_envs < 1:
        raise InvalidArgumentError(f"num_envs must be at least 1, got {num_envs}")
    if render_mode not in (None, "rgb_array"):
        raise InvalidArgumentError(
            f"render_mode {render_mode!r}: remote envs render 'rgb_array' frames (on the "
            "evaluator) or nothing (None)"
        )
    if forced is not None:
        return forced
    return "shm" if transport == "shm" else _PICK if transport == _PICK else "grpc"


def _forced_transport() -> str | None:
    """``ALE_TRANSPORT``'s value ("grpc", "shm"), or None when unset or "any"."""
    value = os.environ.get(TRANSPORT_VAR, "").strip().lower()
    if value not in ("", *_TRANSPORT_VALUES):
        raise InvalidArgumentError(
            f"{TRANSPORT_VAR}={value!r}: one of {', '.join(_TRANSPORT_VALUES)} (or unset)"
        )
    return None if value in ("", _PICK) else value


def _array(t: pb.Tensor, what: str) -> npt.NDArray[Any]:
    return from_tensor(t, what).copy()  # frombuffer is read-only; Gymnasium users may write


class RemoteSession:
    """An open session of ``num_envs`` envs; closed by :meth:`close` (idempotent).

    ``own_client``: the session closes ``client`` when it closes (an env built
    from the environment's variables owns its connection). ``watch``: name the
    session on this process's ``WatchSessions`` stream, so that the evaluator
    closes it within seconds if the process dies (see :mod:`.lifetime`).
    """

    def __init__(
        self,
        client: AleClient,
        *,
        kind: SessionKindName,
        num_envs: int = 1,
        transport: StepTransport = "any",
        own_client: bool = False,
        watch: bool = True,
        render_mode: str | None = None,
        autoreset_mode: str = "next_step",
    ) -> None:
        """``transport``: "any" steps through shared memory where the evaluator offers it
        (a client on its host), else like "stream"; "shm" requires shared memory;
        "stream" steps over one StepStream call where the server offers it (about half
        the per-Step cost of unary calls), falling back to unary Step calls otherwise;
        "unary" one Step call each. ``ALE_TRANSPORT`` overrides it (module docstring)."""
        wants = _check_arguments(kind, num_envs, transport, render_mode)
        self.client = client
        self.kind = kind
        try:
            self.view: TaskView = self._rpc(client.get_spec)
            self.single_observation_space = space_from_spec(self.view.raw.observation_spec)
            self.single_action_space = space_from_spec(self.view.raw.action_spec)
            r = self._call(
                client.stub.OpenSession,
                pb.OpenSessionRequest(
                    task_id=client.task_id,
                    kind=_KINDS[kind],
                    num_envs=int(num_envs),
                    run_id=client.run_id,
                    render_mode=render_mode or "",
                    float64_actions=True,
                    autoreset_mode=autoreset_mode,
                ),
            )
        except BaseException:
            if own_client:
                client.close()
            raise
        self._act_dtype = np.dtype(self.single_action_space.dtype)
        self._float64_ok: bool = r.float64_actions
        """float64 actions travel as they are (else they are cast to the spec's dtype)."""
        self.session_id: str = r.session_id
        self._life = SessionLifetime(client, r.session_id, own_client)
        # Holds only the lifetime, never the session: a finalizer that referenced the
        # session would keep it alive. atexit: the lifetime module's own hook closes
        # all open sessions in parallel instead of one by one.
        self._finalizer = weakref.finalize(self, abandon, self._life)
        self._finalizer.atexit = False
        self.num_envs: int = r.num_envs
        self.episode_budget: int = r.episode_budget
        self.seeds_ignored: bool = r.seeds_ignored
        self.autoreset_mode: str = r.autoreset_mode
        self.max_episode_steps: int = r.max_episode_steps
        self.render_mode = render_mode
        self.render_modes: tuple[str, ...] = tuple(r.render_modes)
        """The render modes this session's task offers on its evaluator."""
        self.render_fps: int = r.render_fps
        self.episodes_completed = 0
        self.eval_complete = False
        self.transport: StepTransport = (
            "unary"
            if transport == "unary" or "step_stream" not in self.view.raw.capabilities
            else "stream"
        )
        """How Steps travel now: "shm" (shared memory), "stream", or "unary" if asked for or
        the server offers no free stream."""
        self._stream: StepStream | None = None
        self._shm: ClientChannel | None = None
        if self.autoreset_mode != autoreset_mode:
            self.close()  # an evaluator that predates autoreset_mode opened a next_step one
            raise UnimplementedError(
                f"this evaluator offers autoreset mode {self.autoreset_mode!r}, not "
                f"{autoreset_mode!r}: use AutoresetMode.NEXT_STEP with it"
            )
        if render_mode is not None and render_mode not in self.render_modes:
            self.close()  # an evaluator that predates render_mode opened it without one
            raise FailedPreconditionError(
                f"task {self.view.task.id} offers no {render_mode!r} frames on this evaluator "
                f"(render modes: {list(self.render_modes)}): open the env without render_mode"
            )
        if watch:
            for _ in range(2):  # a watch whose last session closed meanwhile: a new one
                self._life.watch = watch_for(client)
                if self._life.watch.attach(self.session_id):
                    break
        if wants != "grpc":
            self._try_data_plane(required=wants == "shm")

    @property
    def closed(self) -> bool:
        return self._life.closed

    def _try_data_plane(self, *, required: bool) -> None:
        """Step through shared memory where it can be had; else gRPC, or (``required``)
        close the session and say why."""
        try:
            self._open_data_plane()
        except AleError as exc:
            if required:
                self.close()
                raise UnavailableError(
                    f"no shared-memory data plane for session {self.session_id}: "
                    f"{exc.message} (unset {TRANSPORT_VAR}, or set it to grpc)"
                ) from None
            log.info("session %s: stepping over gRPC (%s)", self.session_id, exc.message)

    def _open_data_plane(self) -> None:
        """Open this session's channel (:mod:`ale_robotics.dataplane`); an AleError says why
        it cannot be had (the session then steps over gRPC)."""
        endpoint = self.client.endpoint
        if "shm_data_plane" not in self.view.raw.capabilities:
            raise UnimplementedError("the evaluator offers no shared-memory data plane here")
        if not endpoint.startswith("unix://"):
            raise UnimplementedError(f"{endpoint} is not a Unix socket: the evaluator is remote")
        r = self._call(
            self.client.stub.OpenDataPlane, pb.OpenDataPlaneRequest(session_id=self.session_id)
        )
        if r.layout_version != LAYOUT_VERSION or os.sep in r.socket_name or not r.socket_name:
            raise UnimplementedError(
                f"the evaluator's data plane (layout {r.layout_version}, socket "
                f"{r.socket_name!r}) is not one this SDK speaks (layout {LAYOUT_VERSION})"
            )
        path = os.path.join(os.path.dirname(endpoint[len("unix://") :]), r.socket_name)
        try:
            channel = ClientChannel(path, r.ticket, timeout_s=self.client.timeout_s)
        except (OSError, ValueError, KeyError) as exc:
            raise UnavailableError(f"cannot open the data plane at {path}: {exc}") from None
        self._shm = self._life.channel = channel
        self.transport = "shm"

    def _channel(self) -> ClientChannel | None:
        """The data plane, while it is open and this is the process that opened it."""
        shm = self._shm
        if shm is None or shm.closed or shm.pid != os.getpid():
            return None
        if self.client.closed:  # as gRPC calls fail on a closed client, so does this path
            self._drop_channel()
            return None
        return shm

    def _drop_channel(self) -> None:
        """The channel ended: later calls go over gRPC."""
        if self._shm is not None:
            self._shm.close()
        self._shm = self._life.channel = None
        self.transport = "stream" if "step_stream" in self.view.raw.capabilities else "unary"

    def _rpc(self, fn: Callable[[], T]) -> T:
        """``fn()``, with a closed connection as a typed error (gRPC raises ValueError)."""
        try:
            return fn()
        except ValueError as exc:
            text = str(exc).lower()  # "...on closed channel!", "...: Channel closed!"
            if "channel" not in text or "closed" not in text:
                raise
            raise FailedPreconditionError(
                "the AleClient's connection is closed (client.close()): open a new client and env"
            ) from None

    def _call(self, method: Callable[..., T], request: Any) -> T:
        return self._rpc(lambda: self.client._call(method, request))

    def _check_open(self) -> None:
        if self._life.closed:
            raise FailedPreconditionError(
                f"session {self.session_id} is closed (close() was called): reset() the env "
                "to open a new session, or make a new env"
            )

    def reset(
        self, seeds: list[int] | None = None
    ) -> tuple[npt.NDArray[Any], list[dict[str, Any]]]:
        """First observations of every env; practice sessions honour ``seeds``."""
        obs, infos = self.reset_wire(seeds)
        return obs, infos.per_env()

    def reset_wire(
        self, seeds: list[int] | None = None, mask: list[bool] | None = None
    ) -> tuple[npt.NDArray[Any], WireInfos]:
        """:meth:`reset`, with the infos as they travelled (for a vector env's layout);
        ``mask`` restarts only the envs it selects (the others get empty infos)."""
        self._check_open()
        shm = self._channel()
        if shm is not None and shm.fits_reset(seeds or [], mask):
            reply = self._over_shm(shm, lambda: shm.reset(seeds or [], mask))
            if reply is not None:
                self.episodes_completed = reply.episodes_completed
                return reply.obs, reply.infos
        request = pb.ResetRequest(session_id=self.session_id, seeds=seeds or [], reset_mask=mask)
        r = self._call(self.client.stub.Reset, request)
        self.episodes_completed = r.episodes_completed
        return _array(r.observation, "observation"), decode_infos(r.info_columns, r.info_json)

    def _over_shm(self, shm: ClientChannel, send: Callable[[], Reply]) -> Reply | None:
        """``send()`` through the data plane; None when the channel had ended before the
        request left (the caller sends it over gRPC instead: nothing ran)."""
        try:
            return send()
        except ChannelClosed as exc:
            self._drop_channel()
            if exc.sent:
                raise
            return None
        except AleError:
            if shm.closed:  # a timeout, or the evaluator ended the channel with the error
                self._drop_channel()
            raise

    def step(self, actions: npt.ArrayLike) -> SessionStep:
        """Send ``[num_envs, *action_shape]`` actions (server-checked): in the spec's dtype, or
        float64 as they are when given float64 (a local MuJoCo env uses those unrounded)."""
        self._check_open()
        arr = np.asarray(actions)
        if arr.dtype != self._act_dtype and not (self._float64_ok and arr.dtype == np.float64):
            arr = arr.astype(self._act_dtype)
        shm = self._channel()
        if shm is not None and shm.fits_action(arr, self._float64_ok):
            reply = self._over_shm(shm, lambda: shm.step(arr))
            if reply is not None:
                assert reply.rewards is not None
                assert reply.terminated is not None and reply.truncated is not None
                self.episodes_completed = reply.episodes_completed
                self.eval_complete = reply.eval_complete
                return SessionStep(
                    reply.obs, reply.rewards, reply.terminated, reply.truncated, reply.infos
                )
        r = self._send(pb.StepRequest(session_id=self.session_id, action=to_tensor(arr)))
        self.episodes_completed = r.episodes_completed
        self.eval_complete = r.eval_complete
        return SessionStep(
            obs=_array(r.observation, "observation"),
            rewards=_array(r.reward, "reward").astype(np.float64, copy=False),
            terminated=_array(r.terminated, "terminated").astype(np.bool_, copy=False),
            truncated=_array(r.truncated, "truncated").astype(np.bool_, copy=False),
            wire_infos=decode_infos(r.info_columns, r.info_json),
        )

    def render(self) -> npt.NDArray[np.uint8]:
        """Every env's current frame, ``[num_envs, height, width, 3]`` uint8 (rendered by the
        evaluator; the session must have been opened with ``render_mode="rgb_array"``)."""
        self._check_open()
        r = self._call(self.client.stub.Render, pb.RenderRequest(session_id=self.session_id))
        return _array(r.frames, "frames")

    def _send(self, request: pb.StepRequest) -> pb.StepResponse:
        if self.transport == "unary":
            return self._unary(request)
        if self._stream is None or self._stream.dead:
            self._stream = self._rpc(lambda: StepStream(self.client))
            self._life.stream = self._stream
        stream = self._stream
        try:
            return stream.step(request)
        except (ResourceExhaustedError, UnimplementedError) as exc:
            if stream.answered:
                raise
            # Refused before reading any request (every stream slot taken): nothing was
            # stepped, so the same request goes as a unary call, and so do later ones.
            log.info("session %s: no step stream (%s); using unary Step", self.session_id, exc)
            self.transport = "unary"
            return self._unary(request)

    def _unary(self, request: pb.StepRequest) -> pb.StepResponse:
        response: pb.StepResponse = self._call(self.client.stub.Step, request)
        return response

    def close(self) -> int:
        """Close the session (an eval session's result is then final); episodes completed.

        Idempotent. While the interpreter is finalizing it sends nothing (gRPC cannot
        finish a call then; see :mod:`.lifetime`): the exit hook has closed the session
        already, or the evaluator does once the process is gone.
        """
        life = self._life
        if not life.begin():
            return self.episodes_completed
        self._finalizer.detach()
        self._stream = None
        self._shm = None
        if sys.is_finalizing():
            return self.episodes_completed
        try:
            if life.stream is not None:
                life.stream.close()
                life.stream = None
            if life.channel is not None:  # goodbye first: the evaluator ends it cleanly
                life.channel.close()
                life.channel = None
            r = self._call(
                self.client.stub.CloseSession, pb.CloseSessionRequest(session_id=self.session_id)
            )
            self.episodes_completed = r.episodes_completed
        except (NotFoundError, FailedPreconditionError):
            pass  # already reaped or closed by the harness, or the connection is closed
        finally:
            life.release_local()
            life.close_client()
        return self.episodes_completed

    def abandon(self) -> None:
        """Close the session from the background closer (for ``__del__``): never blocks."""
        self._finalizer()
