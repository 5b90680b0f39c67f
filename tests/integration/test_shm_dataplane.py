"""The shared-memory data plane against a real evaluator on real Unix sockets.

The SDK picks it where offered and falls back to gRPC elsewhere; answers and errors are
the gRPC ones; a client that vanishes orphans its session as a broken watch does; a
hostile client that writes garbage into its request region, races the evaluator's
copy or spams the wake-ups never crashes the evaluator, never gets a step counted
that it was not answered, and ends with its session closed and a clear error.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ale_robotics.client import AleClient, RemoteEnv, RemoteSession, RemoteVectorEnv
from ale_robotics.dataplane.layout import (
    CLOSED_OFFSET,
    OP_RESET,
    OP_STEP,
    REQUEST_HEAD,
    RESPONSE_HEAD,
    Layout,
)
from ale_robotics.dataplane.regions import seals_supported
from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.v1 import ale_env_pb2 as pb

pytestmark = pytest.mark.skipif(not seals_supported(), reason="kernel without memfd write seals")

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-shm-1"
N = 3


@pytest.fixture(scope="module")
def sevaluator() -> Iterator[RunningEvaluator]:
    with tempfile.TemporaryDirectory(prefix="ale-shm-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=TASK, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a/agent.sock",
            harness_listen=f"unix://{d}/h.sock",
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)


def _agent(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN)


def _session(ev: RunningEvaluator, sid: str) -> Session:
    return ev.evaluator.sessions.call(sid, None, lambda s: s)


def _wait_for(cond: Callable[[], bool], timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"condition not met within {timeout_s}s")
        time.sleep(0.05)


# ------------------------------------------------------------- the SDK's choice --


def test_envs_step_through_shared_memory_unless_grpc_is_forced(
    sevaluator: RunningEvaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "shm_data_plane" in _agent(sevaluator).get_spec().raw.capabilities
    assert sevaluator.data_plane is not None and sevaluator.data_plane.path.is_socket()
    for make in (
        lambda: RemoteEnv(_agent(sevaluator), own_client=True),
        lambda: RemoteVectorEnv(_agent(sevaluator), num_envs=N, own_client=True),
    ):
        env = make()
        try:
            assert env.transport == "shm"
            env.reset(seed=1)
            env.step(env.action_space.sample())
        finally:
            env.close()
    from ale_robotics.client.sb3 import RemoteVecEnv

    venv = RemoteVecEnv(_agent(sevaluator), num_envs=N, own_client=True)
    try:
        assert venv.transport == "shm"
        venv.reset()
        venv.step(np.zeros((N, 1), np.float32))
    finally:
        venv.close()
    monkeypatch.setenv("ALE_TRANSPORT", "grpc")
    env = RemoteEnv(_agent(sevaluator), own_client=True)
    try:
        assert env.transport == "stream"
    finally:
        env.close()
    monkeypatch.setenv("ALE_TRANSPORT", "carrier-pigeon")
    with pytest.raises(InvalidArgumentError, match="ALE_TRANSPORT"):
        RemoteEnv(_agent(sevaluator), own_client=True)


def test_a_tcp_listener_offers_no_data_plane_and_the_sdk_keeps_grpc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TCP client may be on another host: no capability, OpenDataPlane UNIMPLEMENTED, the
    default transport the gRPC stream, and ALE_TRANSPORT=shm an error saying why."""
    with tempfile.TemporaryDirectory(prefix="ale-tcp-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=TASK, run_id=RUN, workers=1),
            agent_listen="127.0.0.1:0",
            harness_listen=f"unix://{d}/h.sock",
        )
        try:
            assert running.data_plane is None
            client = _agent(running)
            assert "shm_data_plane" not in client.get_spec().raw.capabilities
            env = RemoteEnv(client)
            try:
                assert env.transport == "stream"
                with pytest.raises(grpc.RpcError) as err:
                    client.stub.OpenDataPlane(
                        pb.OpenDataPlaneRequest(session_id=env.session_id),
                        metadata=client.metadata,
                    )
                assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
            finally:
                env.close()
            monkeypatch.setenv("ALE_TRANSPORT", "shm")
            with pytest.raises(UnavailableError, match="no shared-memory data plane"):
                RemoteEnv(client)
            client.close()
        finally:
            running.stop(grace=0.5)


def test_errors_are_the_grpc_errors_and_the_channel_survives_them(
    sevaluator: RunningEvaluator,
) -> None:
    shm = RemoteSession(_agent(sevaluator), kind="practice", num_envs=N, own_client=True)
    grpc_ = RemoteSession(
        _agent(sevaluator), kind="practice", num_envs=N, transport="stream", own_client=True
    )
    try:
        assert shm.transport == "shm" and grpc_.transport == "stream"
        errors = []
        for s in (shm, grpc_):
            with pytest.raises(FailedPreconditionError) as before_reset:
                s.step(np.zeros((N, 1), np.float32))
            s.reset([4])
            with pytest.raises(InvalidArgumentError) as bounds:
                s.step(np.full((N, 1), 7.0, np.float32))
            with pytest.raises(InvalidArgumentError) as nan:
                s.step(np.full((N, 1), np.nan, np.float32))
            with pytest.raises(InvalidArgumentError) as shape:  # not for the region: gRPC
                s.step(np.zeros((N + 1, 1), np.float32))
            with pytest.raises(InvalidArgumentError) as seeds:
                s.reset([1, 2])
            errors.append([e.value.message for e in (before_reset, bounds, nan, shape, seeds)])
        sid_free = [m.replace(shm.session_id, "S") for m in errors[0]]
        assert sid_free == [m.replace(grpc_.session_id, "S") for m in errors[1]]
        assert shm.transport == "shm"  # errors leave the channel open
        a = np.full((N, 1), 0.25, np.float32)
        x, y = shm.step(a), grpc_.step(a)
        assert np.array_equal(x.obs, y.obs) and np.array_equal(x.rewards, y.rewards)
    finally:
        shm.close()
        grpc_.close()


def test_a_closed_session_answers_as_over_grpc_and_the_sdk_falls_back(
    sevaluator: RunningEvaluator,
) -> None:
    s = RemoteSession(_agent(sevaluator), kind="practice", num_envs=N, own_client=True)
    other = _agent(sevaluator)
    try:
        s.reset([0])
        other.stub.CloseSession(
            pb.CloseSessionRequest(session_id=s.session_id), metadata=other.metadata
        )
        with pytest.raises(NotFoundError, match=r"closed|no open session"):
            s.step(np.zeros((N, 1), np.float32))
        _wait_for(lambda: sevaluator.data_plane is not None and _channels(sevaluator) == 0, 10)
        with pytest.raises(NotFoundError):
            s.step(np.zeros((N, 1), np.float32))
        assert s.transport == "stream"
    finally:
        other.close()
        s.close()


def _channels(ev: RunningEvaluator) -> int:
    assert ev.data_plane is not None
    return ev.data_plane.channels()


# ------------------------------------------------------------- a vanished client --


def _client_script(sleep_s: float) -> str:
    return textwrap.dedent(
        f"""
        import time
        from ale_robotics.client import AleClient, RemoteSession
        s = RemoteSession(AleClient.from_env(), kind="practice", num_envs=2, watch=False)
        s.reset([0]); s.step([[0.1], [0.2]])
        print(s.session_id, s.transport, flush=True)
        time.sleep({sleep_s})
        """
    )


def _env(ev: RunningEvaluator) -> dict[str, str]:
    return {
        **os.environ,
        "ALE_ENDPOINT": ev.agent_address,
        "ALE_TOKEN": ev.agent_token,
        "ALE_TASK_ID": TASK,
        "ALE_RUN_ID": RUN,
    }


def test_a_killed_client_orphans_its_session_through_the_data_socket(
    sevaluator: RunningEvaluator,
) -> None:
    """No watch stream here: only the data socket's end can tell the evaluator; its session
    is closed after the orphan grace, far sooner than the idle timeout would."""
    manager = sevaluator.evaluator.sessions
    proc = subprocess.Popen(
        [sys.executable, "-c", _client_script(120)],
        env=_env(sevaluator),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        sid, transport = proc.stdout.readline().split()
        assert transport == "shm"
        session = _session(sevaluator, sid)
        idle = session.task.session.idle_timeout_s if session.task.session else 300.0
        assert idle > 60 and not manager.watched(sid)
        proc.kill()
        proc.wait(10)
        _wait_for(lambda: session.closed, manager.orphan_grace_s + 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_goodbye_is_no_death(sevaluator: RunningEvaluator) -> None:
    """A client that ends its channel on purpose keeps its session (it steps over gRPC)."""
    s = RemoteSession(_agent(sevaluator), kind="practice", num_envs=N, own_client=True)
    manager = sevaluator.evaluator.sessions
    try:
        s.reset([0])
        s._drop_channel()
        _wait_for(lambda: _channels(sevaluator) == 0, 10)
        time.sleep(manager.orphan_grace_s + 1.5)  # past the grace a death would have had
        assert s.step(np.zeros((N, 1), np.float32)).obs.shape == (N, 9)
        assert s.transport == "stream"
    finally:
        s.close()


# ---------------------------------------------------------------- hostile client --


@dataclass
class Raw:
    """A channel opened by hand, as a hostile agent would hold it."""

    sock: socket.socket
    layout: Layout
    req: mmap.mmap
    resp: mmap.mmap
    req_efd: int
    resp_efd: int
    seq: int = 0

    def write(self, offset: int, data: bytes) -> None:
        self.req[offset : offset + len(data)] = data

    def send(self, seq: int | None = None) -> None:
        self.seq = self.seq + 1 if seq is None else seq
        self.write(0, struct.pack("<Q", self.seq))
        os.eventfd_write(self.req_efd, 1)

    def answer(
        self, timeout_s: float = 30.0, until_closed: bool = False
    ) -> tuple[int, int, bool, str]:
        """(answered seq, status, closed, message) once the evaluator answered this request
        (``until_closed``: once it ended the channel)."""
        end = time.monotonic() + timeout_s

        def waiting() -> bool:
            if self.resp[CLOSED_OFFSET]:
                return False
            return until_closed or struct.unpack_from("<Q", self.resp, 0)[0] != self.seq

        while waiting():
            if time.monotonic() > end:
                pytest.fail("no answer from the data plane")
            time.sleep(0.001)
        status, _, _, _, _, closed, nbytes = RESPONSE_HEAD.unpack_from(self.resp, 8)
        lay = self.layout
        message = self.resp[lay.info_offset : lay.info_offset + nbytes].decode(errors="replace")
        return struct.unpack_from("<Q", self.resp, 0)[0], status, bool(closed), message

    def close(self) -> None:
        self.req.close()
        self.resp.close()
        for fd in (self.req_efd, self.resp_efd):
            os.close(fd)
        self.sock.close()


def _raw(ev: RunningEvaluator, client: AleClient, sid: str) -> Raw:
    r = client.stub.OpenDataPlane(pb.OpenDataPlaneRequest(session_id=sid), metadata=client.metadata)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(str(Path(ev.agent_address[len("unix://") :]).parent / r.socket_name))
    sock.sendall(r.ticket)
    msg, fds, _, _ = socket.recv_fds(sock, 65536, 4)
    layout = Layout.from_json(json.dumps(json.loads(msg)["layout"]))
    req = mmap.mmap(fds[0], layout.request_bytes)
    resp = mmap.mmap(fds[1], layout.response_bytes, prot=mmap.PROT_READ)
    os.close(fds[0])
    os.close(fds[1])
    return Raw(sock, layout, req, resp, fds[2], fds[3])


@pytest.fixture
def hostile(sevaluator: RunningEvaluator) -> Iterator[tuple[AleClient, str, Raw]]:
    client = _agent(sevaluator)
    sid = client.stub.OpenSession(
        pb.OpenSessionRequest(task_id=TASK, kind=pb.SESSION_KIND_PRACTICE, num_envs=N, run_id=RUN),
        metadata=client.metadata,
    ).session_id
    raw = _raw(sevaluator, client, sid)
    yield client, sid, raw
    raw.close()
    with pytest.raises(grpc.RpcError):  # every hostile test ends with its session closed
        client.stub.CloseSession(pb.CloseSessionRequest(session_id=sid), metadata=client.metadata)
    client.close()


def _bystander_steps(ev: RunningEvaluator) -> None:
    """Another session of the same evaluator still steps, through shared memory."""
    env = RemoteVectorEnv(_agent(ev), num_envs=2, own_client=True)
    try:
        assert env.transport == "shm"
        env.reset(seed=0)
        env.step(np.zeros((2, 1), np.float32))
    finally:
        env.close()


def _reset_request(raw: Raw) -> None:
    raw.write(8, REQUEST_HEAD.pack(OP_RESET, 0, 1, 0))
    raw.write(raw.layout.seeds_offset, struct.pack("<q", 3))
    raw.send()


@pytest.mark.parametrize(
    "attack",
    ["seq-skips", "seq-goes-back", "unknown-op", "too-many-seeds", "step-with-seeds", "bad-flags"],
)
def test_a_request_that_breaks_the_protocol_closes_the_session_with_a_clear_error(
    sevaluator: RunningEvaluator, hostile: tuple[AleClient, str, Raw], attack: str
) -> None:
    _, sid, raw = hostile
    session = _session(sevaluator, sid)
    _reset_request(raw)
    assert raw.answer()[1] == 0  # a good request first: answered
    steps = session.env_steps
    head, seq = {
        "seq-skips": (REQUEST_HEAD.pack(OP_STEP, 0, 0, 0), raw.seq + 2),
        "seq-goes-back": (REQUEST_HEAD.pack(OP_STEP, 0, 0, 0), 0),
        "unknown-op": (REQUEST_HEAD.pack(77, 0, 0, 0), None),
        "too-many-seeds": (REQUEST_HEAD.pack(OP_RESET, 0, N + 1, 0), None),
        "step-with-seeds": (REQUEST_HEAD.pack(OP_STEP, 0, 1, 0), None),
        "bad-flags": (REQUEST_HEAD.pack(OP_STEP, 0x80, 0, 0), None),
    }[attack]
    raw.write(8, head)
    raw.send(seq)
    _, status, closed, message = raw.answer(until_closed=True)
    assert closed and status == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "broke its protocol" in message and sid in message
    _wait_for(lambda: session.closed, 30)
    assert session.env_steps == steps  # nothing stepped for the bad request
    _bystander_steps(sevaluator)


def test_wake_ups_without_requests_end_the_channel(
    sevaluator: RunningEvaluator, hostile: tuple[AleClient, str, Raw]
) -> None:
    _, sid, raw = hostile
    session = _session(sevaluator, sid)
    for _ in range(200_000):
        os.eventfd_write(raw.req_efd, 1)
        if raw.resp[CLOSED_OFFSET]:
            break
        time.sleep(0)
    _, _status, closed, message = raw.answer(until_closed=True)
    assert closed and "eventfd" in message
    _wait_for(lambda: session.closed, 30)


def test_garbage_on_the_data_socket_ends_the_channel(
    sevaluator: RunningEvaluator, hostile: tuple[AleClient, str, Raw]
) -> None:
    _, sid, raw = hostile
    session = _session(sevaluator, sid)
    raw.sock.send(b"\x00garbage")
    _, _, closed, message = raw.answer(until_closed=True)
    assert closed and "unexpected bytes" in message
    _wait_for(lambda: session.closed, 30)


def test_a_request_rewritten_during_its_copy_is_taken_as_copied(
    sevaluator: RunningEvaluator, hostile: tuple[AleClient, str, Raw]
) -> None:
    """A thread scribbles over the action and header while requests flow: every answer is
    a step (counted) or an error (nothing counted), never a crash or a step counted twice."""
    _, sid, raw = hostile
    _session(sevaluator, sid)  # open: the evaluator knows it
    _reset_request(raw)
    assert raw.answer()[1] == 0
    stop = threading.Event()
    lay = raw.layout
    rng = np.random.default_rng(0)
    noise = [rng.bytes(lay.action_count * 4) for _ in range(16)]

    def scribble() -> None:
        i = 0
        while not stop.is_set():
            raw.write(lay.action_offset, noise[i % 16])
            raw.write(12, struct.pack("<I", i % 2))  # flags: float32, float64
            i += 1

    training = sevaluator.evaluator.training
    charged = training.used(RUN)
    thread = threading.Thread(target=scribble, daemon=True)
    thread.start()
    ok = errors = 0
    try:
        for _ in range(150):
            raw.write(8, REQUEST_HEAD.pack(OP_STEP, 0, 0, 0))
            raw.send()
            seq, status, closed, _ = raw.answer()
            assert seq == raw.seq and not closed
            ok += status == 0
            errors += status != 0
    finally:
        stop.set()
        thread.join(5)
    assert ok + errors == 150 and errors > 0
    assert training.used(RUN) - charged == ok * N  # each answered Step once, refused ones never
    _bystander_steps(sevaluator)
    sevaluator.evaluator.sessions.close(sid)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    head=st.tuples(
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
    )
    | st.tuples(
        st.sampled_from([OP_STEP, OP_RESET]),
        st.sampled_from([0, 1]),
        st.integers(0, N),
        st.integers(0, N),
    ),
    body=st.binary(min_size=0, max_size=256),
    at=st.integers(16, 400),
)
def test_any_request_is_answered_or_refused_never_a_crash(
    sevaluator: RunningEvaluator, head: tuple[int, int, int, int], body: bytes, at: int
) -> None:
    client = _agent(sevaluator)
    sid = client.stub.OpenSession(
        pb.OpenSessionRequest(task_id=TASK, kind=pb.SESSION_KIND_PRACTICE, num_envs=N, run_id=RUN),
        metadata=client.metadata,
    ).session_id
    raw = _raw(sevaluator, client, sid)
    session = _session(sevaluator, sid)
    try:
        _reset_request(raw)
        assert raw.answer()[1] == 0
        raw.write(at, body[: raw.layout.request_bytes - at])
        raw.write(8, REQUEST_HEAD.pack(*head))
        raw.send()
        _seq, status, closed, message = raw.answer()
        if closed:
            assert "broke its protocol" in message
            _wait_for(lambda: session.closed, 30)
        elif status == 0:
            assert head[0] in (OP_STEP, OP_RESET)
            assert session.env_steps in (0, N)  # a Reset steps nothing, a Step all N
        else:
            assert message and session.env_steps == 0
        assert client.get_spec().task.id == TASK  # the evaluator is alive
    finally:
        raw.close()
        if not session.closed:
            sevaluator.evaluator.sessions.close(sid)
        client.close()


def test_tickets_are_single_use_and_bad_ones_are_refused(sevaluator: RunningEvaluator) -> None:
    client = _agent(sevaluator)
    s = RemoteSession(client, kind="practice", num_envs=1, transport="stream")
    try:
        r = client.stub.OpenDataPlane(
            pb.OpenDataPlaneRequest(session_id=s.session_id), metadata=client.metadata
        )
        path = str(Path(sevaluator.agent_address[len("unix://") :]).parent / r.socket_name)
        for ticket, ok in ((b"x" * 32, False), (r.ticket, True), (r.ticket, False)):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(path)
            sock.sendall(ticket)
            msg, fds, _, _ = socket.recv_fds(sock, 65536, 4)
            for fd in fds:
                os.close(fd)
            assert ("layout" in json.loads(msg)) is ok, msg
            if not ok:
                assert "ticket" in json.loads(msg)["error"]
            sock.close()
        with pytest.raises(grpc.RpcError) as err:
            client.stub.OpenDataPlane(
                pb.OpenDataPlaneRequest(session_id="sess-" + "0" * 32), metadata=client.metadata
            )
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
    finally:
        s.close()
        client.close()


# -------------------------------------------------------------- inside a sandbox --


def test_an_agent_in_a_bwrap_sandbox_steps_through_shared_memory(
    sevaluator: RunningEvaluator, tmp_path: Path
) -> None:
    """bwrap binds only the agent socket's directory (with the data socket beside it) and
    gives the agent its own /dev/shm and namespaces: the memfds still arrive, and the
    sandboxed agent's steps equal a gRPC twin's outside."""
    from ale_robotics.sandboxes.bwrap.command import bwrap_command, sandbox_available

    if not sandbox_available():
        pytest.skip("bubblewrap cannot start here")
    sock = Path(sevaluator.agent_address[len("unix://") :])
    ws, scratch, sub = tmp_path / "ws", tmp_path / "scratch", tmp_path / "sub"
    for d in (ws, scratch, sub):
        d.mkdir()
    script = textwrap.dedent(
        """
        import json, numpy as np
        from ale_robotics.client import AleClient, RemoteVectorEnv
        env = RemoteVectorEnv(AleClient.from_env(), num_envs=2)
        obs, _ = env.reset(seed=5)
        out = [obs.tolist()]
        for a in np.linspace(-1, 1, 20, dtype=np.float32):
            obs, r, te, tr, info = env.step(np.full((2, 1), a, np.float32))
            out.append([obs.tolist(), r.tolist(), te.tolist(), tr.tolist()])
        print("RESULT " + json.dumps([env.transport, out]), flush=True)
        env.close()
        """
    )
    argv = bwrap_command(
        [sys.executable, "-c", script],
        workspace=ws,
        scratch_dir=scratch,
        submission_dir=sub,
        agent_socket=sock,
        tmp_size_bytes=16 * 1024**2,
    )
    proc = subprocess.run(
        argv, env=_env(sevaluator), capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    transport, inside = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert transport == "shm"
    twin = RemoteVectorEnv(_agent(sevaluator), num_envs=2, transport="stream", own_client=True)
    try:
        obs, _ = twin.reset(seed=5)
        outside = [obs.tolist()]
        for a in np.linspace(-1, 1, 20, dtype=np.float32):
            obs, r, te, tr, _ = twin.step(np.full((2, 1), a, np.float32))
            outside.append([obs.tolist(), r.tolist(), te.tolist(), tr.tolist()])
    finally:
        twin.close()
    assert inside == outside


def test_an_idle_channel_parks_without_a_thread_and_resumes(sevaluator: RunningEvaluator) -> None:
    """Past PARK_AFTER_S without a request a channel gives its thread back; the next request
    is served all the same, and a session closed while parked ends its channel."""
    from ale_robotics.evaluator.server.shm_channel import PARK_AFTER_S

    idle = {"ale-shm-accept", "ale-shm-parking"}

    def serving() -> int:
        """Channel threads of the evaluator (this process: it runs in-process here)."""
        return sum(
            t.name.startswith("ale-shm-") and t.name not in idle for t in threading.enumerate()
        )

    sessions = [
        RemoteSession(_agent(sevaluator), kind="practice", num_envs=N, own_client=True)
        for _ in range(3)
    ]
    other = _agent(sevaluator)
    try:
        for s in sessions:
            s.reset([1])
        assert _channels(sevaluator) >= 3
        _wait_for(lambda: serving() == 0, PARK_AFTER_S + 10)  # all parked: no thread each
        assert sessions[0].step(np.zeros((N, 1), np.float32)).obs.shape == (N, 9)
        assert sessions[0].transport == "shm"
        other.stub.CloseSession(
            pb.CloseSessionRequest(session_id=sessions[1].session_id), metadata=other.metadata
        )
        _wait_for(lambda: _channels(sevaluator) == 2, 15)  # the parked one saw the close
        assert sessions[2].step(np.zeros((N, 1), np.float32)).obs.shape == (N, 9)
    finally:
        other.close()
        for s in sessions:
            s.close()
