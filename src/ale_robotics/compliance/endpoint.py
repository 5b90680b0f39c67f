"""What a compliance run talks to, and thin raw-protocol helpers the test classes share.

The suite speaks the wire protocol directly (requests and ``Tensor`` bytes), not
through :class:`~ale_robotics.client.RemoteEnv`, so that it checks the server and
not our client's conveniences. Only :class:`AleClient` is reused, for the
connection, the token and the mapping of status codes to typed errors.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.client.sdk import AleClient
from ale_robotics.tensors import from_tensor, numpy_dtype, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["Endpoint", "Wire"]


def _fresh_run_id() -> str:
    return f"compliance-{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class Endpoint:
    """An AleEnv listener to check: address, bearer token, and the task to ask for.

    ``new_run_id`` must return a run id that has not used its eval session yet
    (each eval-session test uses one); set it to ``None`` for an evaluator bound
    to a single run, and the eval-session tests are skipped.
    """

    address: str
    token: str
    task_id: str = ""
    new_run_id: Callable[[], str] | None = field(default=_fresh_run_id)


class Wire:
    """Raw calls on one connection; every session it opens is closed by :meth:`close_all`."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.client = AleClient(endpoint.address, endpoint.token, task_id=endpoint.task_id)
        self._open: list[str] = []
        self._spec: pb.GetSpecResponse | None = None

    def spec(self) -> pb.GetSpecResponse:
        if self._spec is None:
            self._spec = self.call("GetSpec", pb.GetSpecRequest(task_id=self.endpoint.task_id))
        return self._spec

    def call(self, method: str, request: Any) -> Any:
        return self.client._call(getattr(self.client.stub, method), request)

    def open(
        self, kind: pb.SessionKind = pb.SESSION_KIND_PRACTICE, num_envs: int = 1, run_id: str = ""
    ) -> pb.OpenSessionResponse:
        r = self.call(
            "OpenSession",
            pb.OpenSessionRequest(
                task_id=self.endpoint.task_id, kind=kind, num_envs=num_envs, run_id=run_id
            ),
        )
        self._open.append(r.session_id)
        return r  # type: ignore[no-any-return]

    def reset(self, session_id: str, seeds: list[int] | None = None) -> pb.ResetResponse:
        req = pb.ResetRequest(session_id=session_id, seeds=seeds or [])
        return self.call("Reset", req)  # type: ignore[no-any-return]

    def step(self, session_id: str, action: npt.NDArray[Any] | pb.Tensor) -> pb.StepResponse:
        tensor = action if isinstance(action, pb.Tensor) else to_tensor(action)
        return self.call("Step", pb.StepRequest(session_id=session_id, action=tensor))  # type: ignore[no-any-return]

    def close(self, session_id: str) -> pb.CloseSessionResponse:
        if session_id in self._open:
            self._open.remove(session_id)
        return self.call("CloseSession", pb.CloseSessionRequest(session_id=session_id))  # type: ignore[no-any-return]

    def close_all(self) -> None:
        from ale_robotics.errors import NotFoundError

        for sid in list(self._open):
            with contextlib.suppress(NotFoundError):
                self.close(sid)
        self.client.close()

    # ------------------------------------------------------------- actions --

    def action_dtype(self) -> np.dtype[Any]:
        return numpy_dtype(self.spec().action_spec.dtype)

    def action_shape(self, num_envs: int) -> tuple[int, ...]:
        return (num_envs, *(int(d) for d in self.spec().action_spec.shape))

    def bounds(self) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
        s = self.spec().action_spec
        if not s.HasField("low"):
            return None
        return from_tensor(s.low), from_tensor(s.high)

    def sample_actions(self, rng: np.random.Generator, num_envs: int) -> npt.NDArray[Any]:
        """Valid actions: uniform within finite bounds, else standard normal clipped to them."""
        shape = self.action_shape(num_envs)
        dtype = self.action_dtype()
        b = self.bounds()
        if b is None:
            return rng.standard_normal(shape).astype(dtype)
        low = np.broadcast_to(b[0].astype(np.float64), shape)
        high = np.broadcast_to(b[1].astype(np.float64), shape)
        finite = np.isfinite(low) & np.isfinite(high)
        x = rng.standard_normal(shape)
        x = np.where(finite, low + (high - low) * rng.random(shape), x)
        x = np.clip(x, low, high).astype(dtype)
        # rounding to dtype must not leave the box
        return np.clip(x, b[0], b[1]).astype(dtype)


@contextlib.contextmanager
def wire(endpoint: Endpoint) -> Iterator[Wire]:
    w = Wire(endpoint)
    try:
        yield w
    finally:
        w.close_all()
