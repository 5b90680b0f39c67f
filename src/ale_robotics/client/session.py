"""A remote session as numpy: OpenSession, Reset, Step, CloseSession over an :class:`AleClient`.

This is the one place that speaks the session protocol on the client side;
:class:`~ale_robotics.client.remote_env.RemoteEnv` and ``RemoteVectorEnv`` only
adapt it to Gymnasium's two APIs. Connection, token metadata and the mapping of
status codes to :mod:`ale_robotics.errors` are :class:`AleClient`'s. Step is
never retried: it is not idempotent.

A session nobody closes is closed all the same (:mod:`.lifetime`): dropped, it
is closed from a background thread; left open at exit, by an ``atexit`` hook;
its process killed, by the evaluator once its watch stream breaks.
"""

from __future__ import annotations

import logging
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
from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnimplementedError,
)
from ale_robotics.infos import WireInfos, decode_infos
from ale_robotics.tensors import from_tensor, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["RemoteSession", "SessionStep", "StepTransport"]

log = logging.getLogger(__name__)

SessionKindName = Literal["practice", "eval"]
StepTransport = Literal["stream", "unary"]
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
        transport: StepTransport = "stream",
        own_client: bool = False,
        watch: bool = True,
        render_mode: str | None = None,
        autoreset_mode: str = "next_step",
    ) -> None:
        """``transport``: "stream" steps over one StepStream call where the server offers
        it (about half the per-Step cost), falling back to unary Step calls otherwise."""
        if kind not in _KINDS:
            raise InvalidArgumentError(f"kind must be 'practice' or 'eval', not {kind!r}")
        if transport not in ("stream", "unary"):
            raise InvalidArgumentError(f"transport must be 'stream' or 'unary', not {transport!r}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise InvalidArgumentError(f"num_envs must be an int, not {num_envs!r}")
        if num_envs < 1:
            raise InvalidArgumentError(f"num_envs must be at least 1, got {num_envs}")
        if render_mode not in (None, "rgb_array"):
            raise InvalidArgumentError(
                f"render_mode {render_mode!r}: remote envs render 'rgb_array' frames (on the "
                "evaluator) or nothing (None)"
            )
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
            "stream"
            if transport == "stream" and "step_stream" in self.view.raw.capabilities
            else "unary"
        )
        """How Steps travel now: "unary" if asked for, or the server offers no free stream."""
        self._stream: StepStream | None = None
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

    @property
    def closed(self) -> bool:
        return self._life.closed

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
        request = pb.ResetRequest(session_id=self.session_id, seeds=seeds or [], reset_mask=mask)
        r = self._call(self.client.stub.Reset, request)
        self.episodes_completed = r.episodes_completed
        return _array(r.observation, "observation"), decode_infos(r.info_columns, r.info_json)

    def step(self, actions: npt.ArrayLike) -> SessionStep:
        """Send ``[num_envs, *action_shape]`` actions (server-checked): in the spec's dtype, or
        float64 as they are when given float64 (a local MuJoCo env uses those unrounded)."""
        self._check_open()
        arr = np.asarray(actions)
        if arr.dtype != self._act_dtype and not (self._float64_ok and arr.dtype == np.float64):
            arr = arr.astype(self._act_dtype)
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
        if sys.is_finalizing():
            return self.episodes_completed
        try:
            if life.stream is not None:
                life.stream.close()
                life.stream = None
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
