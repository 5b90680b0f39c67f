"""A remote session as numpy: OpenSession, Reset, Step, CloseSession over an :class:`AleClient`.

This is the one place that speaks the session protocol on the client side;
:class:`~ale_robotics.client.remote_env.RemoteEnv` and ``RemoteVectorEnv`` only
adapt it to Gymnasium's two APIs. Connection, token metadata and the mapping of
status codes to :mod:`ale_robotics.errors` are :class:`AleClient`'s. Step is
never retried: it is not idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ale_robotics.client.sdk import AleClient, TaskView
from ale_robotics.client.spaces import space_from_spec
from ale_robotics.client.stream import StepStream
from ale_robotics.errors import (
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
    """An open session of ``num_envs`` envs; closed by :meth:`close` (idempotent)."""

    def __init__(
        self,
        client: AleClient,
        *,
        kind: SessionKindName,
        num_envs: int = 1,
        transport: StepTransport = "stream",
    ) -> None:
        """``transport``: "stream" steps over one StepStream call where the server offers
        it (about half the per-Step cost), falling back to unary Step calls otherwise."""
        if kind not in _KINDS:
            raise InvalidArgumentError(f"kind must be 'practice' or 'eval', not {kind!r}")
        if transport not in ("stream", "unary"):
            raise InvalidArgumentError(f"transport must be 'stream' or 'unary', not {transport!r}")
        self.client = client
        self.kind = kind
        self.view: TaskView = client.get_spec()
        self.single_observation_space = space_from_spec(self.view.raw.observation_spec)
        self.single_action_space = space_from_spec(self.view.raw.action_spec)
        self._act_dtype = np.dtype(self.single_action_space.dtype)
        r = client._call(
            client.stub.OpenSession,
            pb.OpenSessionRequest(
                task_id=client.task_id,
                kind=_KINDS[kind],
                num_envs=num_envs,
                run_id=client.run_id,
            ),
        )
        self.session_id: str = r.session_id
        self.num_envs: int = r.num_envs
        self.episode_budget: int = r.episode_budget
        self.seeds_ignored: bool = r.seeds_ignored
        self.autoreset_mode: str = r.autoreset_mode
        self.max_episode_steps: int = r.max_episode_steps
        self.episodes_completed = 0
        self.eval_complete = False
        self.closed = False
        self.transport: StepTransport = (
            "stream"
            if transport == "stream" and "step_stream" in self.view.raw.capabilities
            else "unary"
        )
        """How Steps travel now: "unary" if asked for, or the server offers no free stream."""
        self._stream: StepStream | None = None

    def reset(
        self, seeds: list[int] | None = None
    ) -> tuple[npt.NDArray[Any], list[dict[str, Any]]]:
        """First observations of every env; practice sessions honour ``seeds``."""
        obs, infos = self.reset_wire(seeds)
        return obs, infos.per_env()

    def reset_wire(self, seeds: list[int] | None = None) -> tuple[npt.NDArray[Any], WireInfos]:
        """:meth:`reset`, with the infos as they travelled (for a vector env's layout)."""
        r = self.client._call(
            self.client.stub.Reset, pb.ResetRequest(session_id=self.session_id, seeds=seeds or [])
        )
        self.episodes_completed = r.episodes_completed
        return _array(r.observation, "observation"), decode_infos(r.info_columns, r.info_json)

    def step(self, actions: npt.ArrayLike) -> SessionStep:
        """Send ``[num_envs, *action_shape]`` actions (cast to the spec dtype; server-checked)."""
        arr = np.asarray(actions, dtype=self._act_dtype)
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

    def _send(self, request: pb.StepRequest) -> pb.StepResponse:
        if self.transport == "unary":
            return self._unary(request)
        if self._stream is None or self._stream.dead:
            self._stream = StepStream(self.client)
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
        response: pb.StepResponse = self.client._call(self.client.stub.Step, request)
        return response

    def close(self) -> int:
        """Close the session (an eval session's result is then final); episodes completed."""
        if self.closed:
            return self.episodes_completed
        self.closed = True
        if self._stream is not None:
            self._stream.close()
        try:
            r = self.client._call(
                self.client.stub.CloseSession, pb.CloseSessionRequest(session_id=self.session_id)
            )
        except NotFoundError:  # already reaped or closed by the harness: nothing left to do
            return self.episodes_completed
        self.episodes_completed = r.episodes_completed
        return self.episodes_completed
