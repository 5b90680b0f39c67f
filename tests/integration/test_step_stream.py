"""StepStream over real Unix sockets: same results as unary Step, errors, the stream cap."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from ale_robotics.client import AleClient, RemoteSession, RemoteVectorEnv
from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.evaluator import RunningEvaluator, serve
from ale_robotics.evaluator.core import EvaluatorConfig
from ale_robotics.tasks import Registry
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

TASK = "td3-inverted-double-pendulum-v1"
N = 4


def _serve(root: Path, registry: Registry, **kw: int) -> RunningEvaluator:
    return serve(
        EvaluatorConfig(root / "state", None, task_id=TASK, workers=1),
        agent_listen=f"unix://{root}/a.sock",
        harness_listen=f"unix://{root}/h.sock",
        registry=registry,
        **kw,
    )


@pytest.fixture(scope="module")
def sevaluator(
    tmp_path_factory: pytest.TempPathFactory, registry: Registry
) -> Iterator[RunningEvaluator]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ale-s-") as d:
        running = _serve(Path(d), registry)
        try:
            yield running
        finally:
            running.stop(grace=0.5)


def _client(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id="r")


def _actions(seed: int, steps: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (steps, N, 1)).astype(np.float32)


def test_spec_advertises_the_stream(sevaluator: RunningEvaluator) -> None:
    with _client(sevaluator) as c:
        spec = c.get_spec().raw
    assert "step_stream" in spec.capabilities
    assert spec.limits.max_step_streams == 32


def test_stream_and_unary_give_the_same_episodes(sevaluator: RunningEvaluator) -> None:
    envs = {
        t: RemoteVectorEnv(_client(sevaluator), num_envs=N, transport=t, own_client=True)
        for t in ("stream", "unary")
    }
    try:
        assert envs["stream"].transport == "stream"
        assert envs["unary"].transport == "unary"
        first = {t: e.reset(seed=3)[0] for t, e in envs.items()}
        assert np.array_equal(first["stream"], first["unary"])
        dones = 0
        for a in _actions(0, 80):
            got = {t: e.step(a) for t, e in envs.items()}
            for x, y in zip(got["stream"][:4], got["unary"][:4], strict=True):
                assert np.array_equal(x, y)
            assert got["stream"][4].keys() == got["unary"][4].keys()
            dones += int(got["stream"][2].sum() + got["stream"][3].sum())
        assert dones > 0, "the comparison should cover autoresets"
    finally:
        for e in envs.values():
            e.close()


def test_a_bad_action_ends_the_stream_not_the_session(sevaluator: RunningEvaluator) -> None:
    stream = RemoteSession(_client(sevaluator), kind="practice", num_envs=N, transport="stream")
    twin = RemoteSession(_client(sevaluator), kind="practice", num_envs=N, transport="unary")
    try:
        for s in (stream, twin):
            s.reset([5])
        acts = _actions(1, 6)
        for a in acts[:3]:
            assert np.array_equal(stream.step(a).obs, twin.step(a).obs)
        broken = stream._stream
        with pytest.raises(InvalidArgumentError, match="out of bounds"):
            stream.step(np.full((N, 1), 9.0, dtype=np.float32))
        assert broken is not None and broken.dead
        # nothing was stepped by the refused request: the next steps still match the twin
        for a in acts[3:]:
            assert np.array_equal(stream.step(a).obs, twin.step(a).obs)
        assert stream.transport == "stream" and stream._stream is not broken
    finally:
        stream.close()
        twin.close()


def test_a_closed_session_on_an_open_stream_is_not_found(sevaluator: RunningEvaluator) -> None:
    with _client(sevaluator) as c:
        s = RemoteSession(c, kind="practice", num_envs=N, transport="stream")
        s.reset([1])
        s.step(_actions(2, 1)[0])
        c._call(c.stub.CloseSession, pb.CloseSessionRequest(session_id=s.session_id))
        with pytest.raises(NotFoundError):
            s.step(_actions(2, 1)[0])
        s.close()


def _raw_stream(ev: RunningEvaluator, requests: list[bytes]) -> tuple[list[bytes], grpc.RpcError]:
    """Send raw request bytes on one StepStream; the answers and the status that ended it."""
    with grpc.insecure_channel(ev.agent_address) as ch:
        call = ch.stream_stream(
            "/ale_robotics.v1.AleEnv/StepStream",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        answers: list[bytes] = []
        md = (("authorization", f"Bearer {ev.agent_token}"),)
        try:
            for r in call(iter(requests), metadata=md, timeout=20):
                answers.append(r)
        except grpc.RpcError as err:
            return answers, err
    raise AssertionError("the stream was expected to end with an error")


def test_malformed_bytes_on_a_stream_are_invalid_argument(sevaluator: RunningEvaluator) -> None:
    with _client(sevaluator) as c:
        s = RemoteSession(c, kind="practice", num_envs=N, transport="unary")
        s.reset([1])
        good = pb.StepRequest(session_id=s.session_id, action=to_tensor(_actions(3, 1)[0]))
        answers, err = _raw_stream(sevaluator, [good.SerializeToString(), b"\xff\xff\xff"])
        assert len(answers) == 1  # the request before the bad one was answered
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid protobuf message" in (err.details() or "")
        s.step(_actions(4, 1)[0])  # the session still works
        s.close()


def test_the_stream_cap_refuses_and_the_client_falls_back(
    short_tmp: Path, registry: Registry
) -> None:
    ev = _serve(short_tmp, registry, max_step_streams=1)
    try:
        with _client(ev) as c:
            assert c.get_spec().raw.limits.max_step_streams == 1
            first = RemoteSession(c, kind="practice", num_envs=N, transport="stream")
            first.reset([1])
            first.step(_actions(5, 1)[0])  # holds the only stream slot
            assert first.transport == "stream"

            _, err = _raw_stream(ev, [b""])
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_step_streams" in (err.details() or "")

            second = RemoteSession(c, kind="practice", num_envs=N, transport="stream")
            second.reset([1])
            out = second.step(_actions(5, 1)[0])  # refused stream: the same request goes unary
            assert second.transport == "unary"
            assert out.obs.shape == (N, 9)
            second.step(_actions(6, 1)[0])

            first.close()  # releases the slot
            third = RemoteSession(c, kind="practice", num_envs=N, transport="stream")
            third.reset([1])
            deadline = time.monotonic() + 10  # the slot is free once the server sees the end
            while True:
                third.step(_actions(7, 1)[0])
                if third.transport == "stream" or time.monotonic() > deadline:
                    break
                third.transport = "stream"  # try the stream again
                time.sleep(0.05)
            assert third.transport == "stream"
            second.close()
            third.close()
    finally:
        ev.stop(grace=0.5)


def test_the_client_times_out_a_silent_stream(short_tmp: Path) -> None:
    """A server that never answers: the step fails after the client's timeout, no hang."""
    release: queue.Queue[None] = queue.Queue()

    def silent(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        next(requests)
        release.get(timeout=30)
        return iter(())

    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handler = grpc.stream_stream_rpc_method_handler(silent)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("ale_robotics.v1.AleEnv", {"StepStream": handler})]
    )
    server.add_insecure_port(f"unix://{short_tmp}/silent.sock")
    server.start()
    try:
        from ale_robotics.client.stream import StepStream
        from ale_robotics.errors import DeadlineExceededError

        c = AleClient(f"unix://{short_tmp}/silent.sock", "t", timeout_s=0.5)
        stream = StepStream(c)
        with pytest.raises(DeadlineExceededError, match=r"within 0\.5s"):
            stream.step(pb.StepRequest(session_id="x"))
        assert stream.dead
        c.close()
    finally:
        release.put(None)
        server.stop(0)
