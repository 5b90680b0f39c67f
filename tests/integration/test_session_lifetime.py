"""Sessions nobody closes are freed: dropped envs, killed processes, interpreter shutdown.

Gymnasium code rarely closes its envs (the TD3 authors' ``main.py`` makes a new eval
env every ``eval_freq`` steps and never closes one), and a crashed script closes
nothing; each such session used to hold one of the run's ``max_sessions`` slots for
the 300 s idle reaper. Everything here runs over real gRPC on real Unix sockets, and
the client processes are real processes.
"""

from __future__ import annotations

import gc
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from helpers import run_bound_evaluator

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
from ale_robotics.errors import ResourceExhaustedError
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.tasks import Registry
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-life-1"


@pytest.fixture(scope="module")
def levaluator(registry: Registry) -> Iterator[RunningEvaluator]:
    """A real evaluator bound to one run, as the harness starts it (max_sessions = 8)."""
    with run_bound_evaluator(registry, TASK, RUN) as running:
        yield running


EVALUATOR_THREADS = ("ale-agent_", "ale-harness_", "ale-session-closer")
"""Name prefixes of threads started on first use and kept for the process's life: the in-process
evaluator's listener pools and the client's session closer (client/lifetime.py)."""


def _agent(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN)


def _env_vars(ev: RunningEvaluator) -> dict[str, str]:
    return {
        **os.environ,
        "ALE_ENDPOINT": ev.agent_address,
        "ALE_TOKEN": ev.agent_token,
        "ALE_TASK_ID": TASK,
        "ALE_RUN_ID": RUN,
    }


def _wait_for(cond: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until ``cond()`` held; fails the test past ``timeout_s``."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"condition not met within {timeout_s}s")
        time.sleep(0.05)
    return time.monotonic() - start


def _open(ev: RunningEvaluator) -> int:
    return ev.evaluator.sessions.count(RUN)


def test_td3_style_loop_of_unclosed_eval_envs_never_exhausts_sessions(
    levaluator: RunningEvaluator,
) -> None:
    """The TD3 authors' loop: one training env, and every ``eval_freq`` steps a fresh eval
    env that is never closed (``eval_policy`` makes one and returns), 20 times. The run's
    limit is 8 sessions: the 9th unclosed env used to be RESOURCE_EXHAUSTED."""
    assert levaluator.evaluator.sessions.count(RUN) == 0

    def eval_policy(seed: int) -> float:
        eval_env = RemoteEnv(_agent(levaluator), own_client=True)  # never closed, as in TD3
        total = 0.0
        eval_env.reset(seed=seed + 100)
        for _ in range(10):
            _, reward, terminated, truncated, _ = eval_env.step(eval_env.action_space.sample())
            total += reward
            if terminated or truncated:
                eval_env.reset()
        return total

    train = RemoteEnv(_agent(levaluator), own_client=True)
    train.reset(seed=0)
    most = 0
    for evaluation in range(20):
        for _ in range(100):  # "eval_freq" training steps
            _, _, terminated, truncated, _ = train.step(train.action_space.sample())
            if terminated or truncated:
                train.reset()
        eval_policy(evaluation)
        most = max(most, _open(levaluator))
    train.close()
    assert most <= 3, f"dropped eval envs piled up: {most} sessions open at once"
    _wait_for(lambda: _open(levaluator) == 0, 60.0)


def test_an_env_collected_as_garbage_frees_its_session(levaluator: RunningEvaluator) -> None:
    """An env caught in a reference cycle is freed only by the cycle collector: its
    finalizer closes the session from the background closer, never inside gc itself."""
    env = RemoteVectorEnv(_agent(levaluator), num_envs=2, own_client=True)
    env.reset(seed=1)
    env.step(env.action_space.sample())  # opens its step stream
    env.cycle = env  # type: ignore[attr-defined]
    del env
    assert levaluator.evaluator.sessions.count(RUN) == 1, "the cycle keeps it until collected"
    gc.collect()
    # closed by its finalizer: well before the 300 s idle reaper would (a deadline, not a
    # guess of how fast this host runs the background closer)
    _wait_for(lambda: _open(levaluator) == 0, 60.0)


def test_a_dropped_stream_env_leaves_no_client_threads(levaluator: RunningEvaluator) -> None:
    """A dropped stream-transport env used to leave its 3 client threads (gRPC's request
    sender, the watchdog, the channel's poller) and its channel alive for good."""
    baseline = {t.ident for t in threading.enumerate()}
    env = RemoteEnv(_agent(levaluator), own_client=True, transport="stream")
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    assert env.transport == "stream"
    assert len(threading.enumerate()) > len(baseline)
    del env
    _wait_for(lambda: _open(levaluator) == 0, 60.0)

    def extra() -> list[str]:
        """New threads of this process but those started once on first use and kept: the
        pools of the evaluator's listeners (it runs in this process too: ale-agent_N,
        ale-harness_N) and the client's one session closer, new when this test is the
        first of its worker to use them."""
        return [
            t.name
            for t in threading.enumerate()
            if t.ident not in baseline and not t.name.startswith(EVALUATOR_THREADS)
        ]

    _wait_for(lambda: not extra(), 60.0)


def test_a_killed_client_process_frees_its_sessions_within_seconds(
    levaluator: RunningEvaluator,
) -> None:
    """SIGKILL runs no finalizer and no atexit: the evaluator notices that the process's
    watch stream broke and closes its sessions (one per transport here) within seconds,
    not after session_idle_timeout_s = 300 s."""
    script = textwrap.dedent(
        """
        import time
        from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
        a = RemoteEnv(AleClient.from_env(), own_client=True, transport="unary")
        b = RemoteVectorEnv(AleClient.from_env(), num_envs=2, own_client=True, transport="stream")
        a.reset(seed=0); a.step(a.action_space.sample())
        b.reset(seed=0); b.step(b.action_space.sample())
        print(a.session_id, b.session_id, flush=True)
        time.sleep(120)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env=_env_vars(levaluator),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ids = proc.stdout.readline().split()
        assert len(ids) == 2, "the client process did not open its sessions"
        manager = levaluator.evaluator.sessions
        _wait_for(lambda: all(manager.watched(s) for s in ids), 60.0)
        assert _open(levaluator) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # closed once its watch stream broke (a 2 s grace), not by the 300 s idle reaper
        _wait_for(lambda: _open(levaluator) == 0, 60.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_watch_that_breaks_and_reconnects_in_time_keeps_its_session(
    levaluator: RunningEvaluator,
) -> None:
    """A lost connection is not a dead client: naming the session on a new watch within
    the grace keeps it, while a watch that just breaks has it closed after the grace."""
    channel = grpc.insecure_channel(levaluator.agent_address)
    stub = pb_grpc.AleEnvStub(channel)
    md = (("authorization", f"Bearer {levaluator.agent_token}"),)
    manager = levaluator.evaluator.sessions
    try:
        kept, lost = (
            stub.OpenSession(
                pb.OpenSessionRequest(task_id=TASK, kind=pb.SESSION_KIND_PRACTICE, run_id=RUN),
                metadata=md,
            ).session_id
            for _ in range(2)
        )
        first_requests: queue.SimpleQueue[pb.WatchSessionsRequest | None] = queue.SimpleQueue()
        first = stub.WatchSessions(iter(first_requests.get, None), metadata=md)
        first_requests.put(pb.WatchSessionsRequest(session_ids=[kept, lost]))
        answer = next(first)
        assert list(answer.not_found) == [] and answer.grace_s == manager.orphan_grace_s
        first.cancel()  # broken, as a dead process's stream is (no half-close)
        second_requests: queue.SimpleQueue[pb.WatchSessionsRequest | None] = queue.SimpleQueue()
        second = stub.WatchSessions(iter(second_requests.get, None), metadata=md)
        second_requests.put(pb.WatchSessionsRequest(session_ids=[kept, "sess-nope"]))
        assert list(next(second).not_found) == ["sess-nope"]
        _wait_for(lambda: manager.count(RUN) == 1, manager.orphan_grace_s + 60.0)
        assert manager.watched(kept) and not manager.watched(lost)
        stub.CloseSession(pb.CloseSessionRequest(session_id=kept), metadata=md)
        second.cancel()
    finally:
        channel.close()


def test_the_session_limit_names_the_open_sessions_and_what_to_do(
    levaluator: RunningEvaluator,
) -> None:
    """Past max_sessions the error lists every open session of the run (id, kind, envs,
    idle time) and says to close envs, so that a script's author can find the leak."""
    held = [RemoteEnv(_agent(levaluator), own_client=True) for _ in range(8)]
    try:
        with pytest.raises(ResourceExhaustedError) as err:
            RemoteEnv(_agent(levaluator), own_client=True)
        message = err.value.message
        for env in held:
            assert f"{env.session_id} (practice, 1 env(s), idle" in message
        assert "env.close()" in message and "session.max_sessions = 8" in message
    finally:
        for env in held:
            env.close()
    assert _open(levaluator) == 0


_SHUTDOWN_SCRIPT = """
import faulthandler
from ale_robotics.client import RemoteEnv, RemoteVectorEnv

faulthandler.dump_traceback_later(15, exit=True)  # a hang shows where it hangs

single = RemoteEnv.from_env()  # transport "stream", the default
single.reset(seed=0)
single.step(single.action_space.sample())
vector = RemoteVectorEnv.from_env(num_envs=2)
vector.reset(seed=0)
vector.step(vector.action_space.sample())


class CloseAtTeardown:
    # Module globals are torn down while the interpreter finalizes: a close() here
    # used to hang forever in grpc's channel.close().
    def __del__(self):
        single.close()
        vector.close()


keeper = CloseAtTeardown()
print(single.session_id, vector.session_id, flush=True)
"""


def test_closing_stream_envs_during_interpreter_shutdown_never_hangs(
    levaluator: RunningEvaluator,
) -> None:
    """A script that exits with stream envs open, closed (or not) while the interpreter
    tears itself down: it exits at once, and its sessions are closed on the way out."""
    try:  # a hang never ends: a deadline far past a slow host's exit says it hung
        out = subprocess.run(
            [sys.executable, "-c", _SHUTDOWN_SCRIPT],
            env=_env_vars(levaluator),
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the client process hung at interpreter shutdown")
    assert "Timeout" not in out.stderr, f"hung at interpreter shutdown: {out.stderr}"
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.split()) == 2
    _wait_for(lambda: _open(levaluator) == 0, 60.0)
