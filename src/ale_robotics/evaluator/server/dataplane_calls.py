"""OpenDataPlane: a ticket for one session's Step and Reset through shared memory.

A module of its own (the servicer's other calls are :mod:`.servicer`'s) with the one
call of the data plane's control side and the capability that announces it; the data
plane itself is :mod:`.dataplane` and :mod:`.shm_channel`.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from ale_robotics.dataplane.layout import LAYOUT_VERSION
from ale_robotics.errors import UnimplementedError
from ale_robotics.evaluator.runs.registry import Scope
from ale_robotics.evaluator.server.dataplane import TICKET_TTL_S, DataPlaneServer
from ale_robotics.evaluator.server.status import rpc
from ale_robotics.evaluator.sessions.manager import SessionManager
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["DataPlaneCalls"]


class DataPlaneCalls:
    """The servicer's OpenDataPlane (mixed into it: ``_data_plane``, ``_sessions``, ``_scope``)."""

    _data_plane: DataPlaneServer | None
    _sessions: SessionManager
    _scope: Callable[[grpc.ServicerContext], Scope]  # the servicer's: who the call acts for

    def with_data_plane(self, caps: list[str]) -> list[str]:
        """``caps`` with ``shm_data_plane`` where this listener has a data plane (a Unix
        socket) and the task has sessions (``step_stream`` is among them)."""
        if self._data_plane is not None and "step_stream" in caps:
            return [*caps, "shm_data_plane"]
        return caps

    @rpc
    def OpenDataPlane(
        self, request: pb.OpenDataPlaneRequest, context: grpc.ServicerContext
    ) -> pb.OpenDataPlaneResponse:
        """A ticket for Step and Reset of one of the caller's sessions over shared memory
        (:mod:`.dataplane`); UNIMPLEMENTED on a listener that is no Unix socket."""
        scope = self._scope(context)
        if self._data_plane is None:
            raise UnimplementedError(
                "this listener has no shared-memory data plane (only an agent listener on a "
                "Unix socket has one): use Step or StepStream"
            )
        session = self._sessions.call(
            request.session_id, context.time_remaining(), lambda s: s, scope
        )
        return pb.OpenDataPlaneResponse(
            socket_name=self._data_plane.socket_name,
            ticket=self._data_plane.offer(session, scope),
            ticket_ttl_s=TICKET_TTL_S,
            layout_version=LAYOUT_VERSION,
        )
