"""``evaluator serve`` drains on its first SIGTERM (real processes, real gRPC, real signals).

* A job running when SIGTERM arrives finishes SUCCEEDED; meanwhile the process claims
  nothing more (a queued job stays QUEUED, attempt 0), health says NOT_SERVING and
  OpenSession is refused UNAVAILABLE with the drain's message; then it exits 0.
* A job longer than ``--drain-s`` is requeued at once (QUEUED, no owner, no lease),
  claimable by another process at once, and the process exits 0.
* An open interactive session's next call gets UNAVAILABLE saying the evaluator is
  shutting down.

The second signal (stop at once) is tested with a job running in
``test_evaluator_serve_cli.py``.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from integration.test_evaluator_serve_cli import RUN, Served, _jobs, _until, _volume

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.errors import AleError, UnavailableError
from ale_robotics.evaluator.server.drain import DRAINING, SHUTTING_DOWN
from ale_robotics.evaluator.store import SqliteJobStore
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

INTERACTIVE_TASK = "td3-inverted-double-pendulum-v1"


@pytest.fixture
def served() -> list[Served]:
    started: list[Served] = []
    yield started  # type: ignore[misc]
    for s in started:
        s.reap()


def _health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return int(stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status)


def _running(ev: Served, token: str) -> None:
    _until("the job to run", lambda: _jobs(ev.state).get(token, ("",))[0] == "RUNNING")


def test_a_job_running_at_sigterm_finishes_and_serve_exits_0(
    short_tmp: Path, served: list[Served]
) -> None:
    vol = _volume(short_tmp)
    ev = Served(short_tmp, "--run-id", RUN)
    served.append(ev)
    token = ev.ready()
    with AleClient(ev.agent_address, token, run_id=RUN, submission_dir=vol) as c:
        c.submit(client_token="first")
        c.submit(client_token="second")
    _running(ev, "first")
    ev.proc.send_signal(signal.SIGTERM)
    _until("the drain to start", lambda: "draining:" in ev.output())
    assert _jobs(ev.state)["first"][0] == "RUNNING", "the job ended before the test looked"

    assert _health(ev.agent_address) == health_pb2.HealthCheckResponse.NOT_SERVING
    with grpc.insecure_channel(ev.agent_address) as channel:
        stub = pb_grpc.AleEnvStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.OpenSession(
                pb.OpenSessionRequest(run_id=RUN, num_envs=1),
                metadata=(("authorization", f"Bearer {token}"),),
                timeout=5,
            )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert refused.value.details() == DRAINING

    assert ev.proc.wait(timeout=120) == 0, ev.output()
    out = ev.output()
    assert "Traceback" not in out, out
    jobs = _jobs(ev.state)
    assert jobs["first"] == ("SUCCEEDED", 1)
    assert jobs["second"] == ("QUEUED", 0)  # never claimed: left to another replica
    assert "ended SUCCEEDED" in out
    assert out.rstrip().splitlines()[-1] == "evaluator stopped"


def test_a_job_longer_than_the_drain_is_requeued_at_once(
    short_tmp: Path, served: list[Served]
) -> None:
    vol = _volume(short_tmp)
    ev = Served(short_tmp, "--run-id", RUN, "--drain-s", "0.5", "--job-lease-s", "60")
    served.append(ev)
    token = ev.ready()
    with AleClient(ev.agent_address, token, run_id=RUN, submission_dir=vol) as c:
        job_id = c.submit(client_token="long")
    _running(ev, "long")
    t0 = time.monotonic()
    ev.proc.send_signal(signal.SIGTERM)
    assert ev.proc.wait(timeout=30) == 0, ev.output()
    # sooner than the 60 s lease another replica would otherwise wait out
    assert time.monotonic() - t0 < 60
    assert f"job {job_id} still running at the deadline: requeued" in ev.output()

    with SqliteJobStore(ev.state / "jobs.sqlite3", owner="another-replica") as other:
        job = other.get(job_id)
        assert job is not None
        assert (job.state.value, job.attempts, job.owner, job.lease_until) == ("QUEUED", 1, "", 0)
        claimed = other.claim_next()
        assert claimed is not None and claimed.job_id == job_id
        assert (claimed.state.value, claimed.attempts) == ("RUNNING", 2)


def test_an_open_sessions_next_call_reads_that_the_evaluator_shuts_down(
    short_tmp: Path, served: list[Served]
) -> None:
    _volume(short_tmp)
    ev = Served(short_tmp, "--run-id", RUN, "--task", INTERACTIVE_TASK)
    served.append(ev)
    token = ev.ready()
    client = AleClient(ev.agent_address, token, task_id=INTERACTIVE_TASK, run_id=RUN)
    env = RemoteEnv(client, own_client=True, transport="unary")
    env.reset(seed=0)
    action = np.zeros(env.action_space.shape, dtype=np.float32)
    env.step(action)
    ev.proc.send_signal(signal.SIGTERM)
    error: AleError | None = None
    deadline = time.monotonic() + 30
    while error is None and time.monotonic() < deadline:
        try:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        except AleError as exc:
            error = exc
    assert isinstance(error, UnavailableError), error
    assert error.message == SHUTTING_DOWN
    assert ev.proc.wait(timeout=30) == 0, ev.output()
    assert "drain: closed 1 interactive session(s)" in ev.output()
    with contextlib.suppress(AleError):  # its session is gone with the evaluator
        env.close()
