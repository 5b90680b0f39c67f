"""Run an evaluator: one :class:`Evaluator`, two gRPC listeners (agent and harness).

Each listener is its own ``grpc.Server`` with its own token and a servicer fixed
to its role, so no request can talk its way into the other role. Both serve the
standard health and reflection services (unauthenticated, they reveal no data)
so that ``grpcurl`` and load balancers work. Reflection is served as both
``grpc.reflection.v1`` (what current tools ask for first) and ``v1alpha``:
grpcio-reflection implements only v1alpha, whose messages are the v1 messages
field for field, so the v1 method is the same servicer under the v1 name.

A TCP listener serves TLS given a :class:`~.tls.ServerTls` (mutual TLS with a client
CA); a plaintext one on a non-loopback address is refused unless ``insecure`` (see
:mod:`.tls`). Unix sockets are always plaintext.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from ale_robotics.addresses import normalize_address, split_host_port
from ale_robotics.dataplane.layout import data_socket_name
from ale_robotics.dataplane.regions import seals_supported
from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.execution import Executor
from ale_robotics.evaluator.runs.registry import Access, Scope
from ale_robotics.evaluator.server.auth import AuthInterceptor, Role, listener_scope
from ale_robotics.evaluator.server.dataplane import DataPlaneServer
from ale_robotics.evaluator.server.drain import DrainGate, DrainReport, drain
from ale_robotics.evaluator.server.guard import RequestGuardInterceptor
from ale_robotics.evaluator.server.servicer import Backends, make_servicer
from ale_robotics.evaluator.server.tls import ServerTls, check_listeners
from ale_robotics.evaluator.state.directory import StateDir, read_token
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "DEFAULT_MAX_STEP_STREAMS", "RunningEvaluator", "serve"]

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_STEP_STREAMS = 32
"""Open StepStream calls per listener; each holds a server thread while it is open."""
_UNARY_THREADS = 16
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AleEnv"].full_name
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


def _add_reflection(server: grpc.Server, service_names: tuple[str, ...]) -> None:
    """Reflection v1alpha and v1 (same messages on the wire) for ``service_names``."""
    names = (*service_names, reflection.SERVICE_NAME, REFLECTION_V1)
    servicer = reflection.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(REFLECTION_V1, {"ServerReflectionInfo": v1}),)
    )


@dataclass
class RunningEvaluator:
    evaluator: Evaluator
    agent_address: str
    harness_address: str
    agent_token: str
    """What the agent listener accepts as its own token: on an evaluator bound to one run,
    minted for that run (see :func:`_agent_token`); on a shared one, the state dir's
    ``agent.token`` (GetSpec only: runs get theirs from OpenRun)."""
    harness_token: str
    _servers: tuple[grpc.Server, grpc.Server]
    _health: health.HealthServicer
    practice_token: str | None = None
    """The operator's out-of-run practice token (``STATE_DIR/practice.token``), only with
    ``practice_without_run``; never handed to an agent."""
    _gate: DrainGate | None = None
    data_plane: DataPlaneServer | None = None
    """The shared-memory data plane beside the agent socket (None: not a Unix socket, or a
    kernel that cannot seal memfds)."""

    def drain(
        self,
        deadline_s: float,
        *,
        interrupt: threading.Event | None = None,
        say: Callable[[str], None] = log.info,
    ) -> DrainReport:
        """Drain before :meth:`stop` (:mod:`.drain`): the job under way gets ``deadline_s``
        to finish, then is requeued; sessions are closed. ``interrupt`` cuts it short."""

        def not_serving() -> None:
            for name in ("", SERVICE_NAME):
                self._health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

        gate = self._gate if self._gate is not None else DrainGate()
        stop = interrupt if interrupt is not None else threading.Event()
        return drain(self.evaluator, gate, not_serving, deadline_s, interrupt=stop, say=say)

    def stop(self, grace: float = 2.0) -> None:
        self._health.enter_graceful_shutdown()
        if self.data_plane is not None:
            self.data_plane.stop()
        for server in self._servers:
            server.stop(grace).wait()
        self.evaluator.stop()

    def wait(self) -> None:
        self._servers[0].wait_for_termination()


def _run_tokens(evaluator: Evaluator) -> Callable[[bytes], Scope | None] | None:
    """The agent listener's lookup of run tokens (OpenRun); none on an evaluator bound to
    one run, which must not honour tokens a shared evaluator on the same state dir issued."""
    if evaluator.config.run_id is not None:
        return None

    def lookup(token: bytes) -> Scope | None:
        run = evaluator.runs.by_token(token)
        return None if run is None else Scope(Access.RUN, run.run_id, run.task_id)

    return lookup


def _agent_token(config: EvaluatorConfig, state: StateDir, given: Path | None) -> str:
    """The agent listener's own token: ``given`` (a file the caller wrote), else one minted
    now for the bound run, else (a shared evaluator) the state dir's ``agent.token``.

    An evaluator bound to one run (the embedded one of ``ale-robotics run``, a bound
    ``evaluator serve --run-id``) never uses ``agent.token``: that file is shared by
    every evaluator on the state dir, so an agent holding it could act outside its run.
    The minted token lives in this process only and dies with it or with CloseRun.
    """
    if given is not None:
        return read_token(given)
    if config.run_id is not None:
        return secrets.token_urlsafe(32)
    return state.token("agent")


def _backends(evaluator: Evaluator) -> Backends:
    """The services a listener's servicer translates to, as the evaluator wired them."""
    return Backends(
        tasks=evaluator.tasks,
        access=evaluator.access,
        jobs=evaluator.jobs,
        sessions=evaluator.sessions,
        runs=evaluator.run_service,
        training=evaluator.training,
        checkpoints=evaluator.checkpoints,
        videos=evaluator.videos,
    )


def _listener(
    evaluator: Evaluator,
    role: Role,
    address: str,
    token: str,
    health_servicer: health.HealthServicer,
    max_message_bytes: int,
    max_step_streams: int,
    practice_token: str | None = None,
    tls: ServerTls | None = None,
    gate: DrainGate | None = None,
    data_plane: DataPlaneServer | None = None,
) -> tuple[grpc.Server, str]:
    # Open streams can hold at most max_step_streams threads; the rest serve unary calls.
    workers = _UNARY_THREADS + max_step_streams
    agent = role is Role.AGENT
    auth = AuthInterceptor(
        token,
        scope=listener_scope(evaluator.config, role),
        run_tokens=_run_tokens(evaluator) if agent else None,
        practice_token=practice_token if agent else None,
        closed=evaluator.access.closed if agent else None,
        on_call=evaluator.access.touch if agent else None,
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"ale-{role.value}"),
        # the drain's gate first: a call it refuses costs nothing else
        interceptors=[gate or DrainGate(), auth, RequestGuardInterceptor()],
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
    )
    servicer = make_servicer(
        _backends(evaluator), role, max_message_bytes, max_step_streams, auth, data_plane
    )
    pb_grpc.add_AleEnvServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    _add_reflection(
        server, (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
    )
    addr = normalize_address(address)
    if addr.startswith("unix://"):
        path = Path(addr[len("unix://") :])
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_socket():
            path.unlink()  # stale socket of a previous process
    if tls is not None and split_host_port(addr) is not None:
        port = server.add_secure_port(addr, tls.credentials())
    else:
        port = server.add_insecure_port(addr)
    if port == 0:
        raise OSError(f"cannot listen on {addr}")
    if not addr.startswith("unix://") and addr.rsplit(":", 1)[-1] == "0":
        addr = f"{addr.rsplit(':', 1)[0]}:{port}"
    server.start()
    return server, addr


def serve(
    config: EvaluatorConfig,
    *,
    agent_listen: str | None = None,
    harness_listen: str | None = None,
    agent_token_file: Path | None = None,
    harness_token_file: Path | None = None,
    registry: Registry | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_step_streams: int = DEFAULT_MAX_STEP_STREAMS,
    executor: Executor | None = None,
    tls: ServerTls | None = None,
    insecure: bool = False,
) -> RunningEvaluator:
    """Start both listeners and the job runner; returns once they accept calls.

    ``tls``: what TCP listeners serve TLS with; without it a TCP listener on a
    non-loopback address is refused (:class:`InvalidArgumentError`, before anything
    starts) unless ``insecure``.

    ``executor``: the rollout executor ``config`` asks for, made (and its workers
    started) by the caller; the evaluator owns it from here on (see :class:`.core.Evaluator`).
    """
    listeners = {"--agent-listen": agent_listen, "--harness-listen": harness_listen}
    check_listeners(listeners, tls, insecure)
    evaluator = Evaluator(config, registry or default_registry(), executor=executor)
    state = evaluator.state
    agent_token = _agent_token(config, state, agent_token_file)
    harness_token = state.token("harness", harness_token_file)
    practice_token = state.token("practice") if config.practice_without_run else None
    health_servicer = health.HealthServicer()
    gate = DrainGate()
    # in a directory of its own: the agent sandbox binds the socket's whole directory
    agent_addr = normalize_address(agent_listen or f"unix://{state.root / 'agent' / 'agent.sock'}")
    data_plane = _data_plane(evaluator, agent_addr, max_message_bytes)
    try:
        agent_server, agent_addr = _listener(
            evaluator,
            Role.AGENT,
            agent_addr,
            agent_token,
            health_servicer,
            max_message_bytes,
            max_step_streams,
            practice_token,
            tls,
            gate,
            data_plane,
        )
    except BaseException:
        if data_plane is not None:
            data_plane.stop()
        raise
    try:
        harness_server, harness_addr = _listener(
            evaluator,
            Role.HARNESS,
            harness_listen or f"unix://{state.root / 'harness.sock'}",
            harness_token,
            health_servicer,
            max_message_bytes,
            max_step_streams,
            tls=tls,
            gate=gate,
        )
    except BaseException:
        agent_server.stop(0)
        if data_plane is not None:
            data_plane.stop()
        raise
    evaluator.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    log.info("evaluator serving: agent %s, harness %s", agent_addr, harness_addr)
    return RunningEvaluator(
        evaluator=evaluator,
        agent_address=agent_addr,
        harness_address=harness_addr,
        agent_token=agent_token,
        harness_token=harness_token,
        _servers=(agent_server, harness_server),
        _health=health_servicer,
        practice_token=practice_token,
        _gate=gate,
        data_plane=data_plane,
    )


def _data_plane(
    evaluator: Evaluator, agent_addr: str, max_message_bytes: int
) -> DataPlaneServer | None:
    """The shared-memory data plane beside a Unix agent socket (:mod:`.dataplane`); None for
    a TCP listener (its clients may be on other hosts) or a kernel that cannot seal memfds."""
    if not agent_addr.startswith("unix://"):
        return None
    if not seals_supported():
        log.warning("this kernel cannot seal memfds (Linux < 5.1): no shared-memory data plane")
        return None
    path = Path(agent_addr[len("unix://") :])
    data_path = path.parent / data_socket_name(path.name)
    if len(os.fsencode(data_path)) >= _SUN_PATH_MAX:
        # The agent socket's path fits, its data plane's (".data" longer) does not: serve
        # without it (clients step over gRPC) rather than fail to start.
        log.warning(
            "the data plane's socket path %s is too long for a Unix socket (%d bytes at most): "
            "no shared-memory data plane (give the agent socket a shorter path)",
            data_path,
            _SUN_PATH_MAX - 1,
        )
        return None
    return DataPlaneServer(evaluator.sessions, path, max_message_bytes)


_SUN_PATH_MAX = 108
"""Bytes of a Unix socket's path on Linux (``sun_path``), its final NUL included."""
