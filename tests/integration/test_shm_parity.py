"""Every interactive task, on its hidden seeds, gives the same results through shared memory
as through gRPC: every observation, reward, flag and info of an eval session, and the
recorded episodes and metrics, bit for bit.

Two evaluators with the same secret and run id (so the same hidden seeds) run the same
deterministic policy, one reached through the data plane (the SDK's default) and one
with ``ALE_TRANSPORT=grpc``; a smoke run (two episodes) keeps it short.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.dataplane.regions import seals_supported
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks import TaskMode, default_registry
from ale_robotics.v1 import ale_env_pb2 as pb

pytestmark = pytest.mark.skipif(not seals_supported(), reason="kernel without memfd write seals")

RUN = "run-parity-1"
SECRET = bytes(range(32))
FAST = "td3-inverted-double-pendulum-v1"
INTERACTIVE = sorted(e.spec.id for e in default_registry() if e.spec.mode is TaskMode.INTERACTIVE)


@contextmanager
def _evaluator(task_id: str, root: Path) -> Iterator[RunningEvaluator]:
    state = root / "state"
    state.mkdir(mode=0o700, parents=True)
    fd = os.open(state / "secret", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, SECRET)
    os.close(fd)
    running = serve(
        EvaluatorConfig(state, None, task_id=task_id, run_id=RUN, workers=1, smoke_episodes=2),
        agent_listen=f"unix://{root}/a/agent.sock",
        harness_listen=f"unix://{root}/h.sock",
    )
    try:
        yield running
    finally:
        running.stop(grace=0.5)


def _play(running: RunningEvaluator, task_id: str) -> tuple[str, list[Any], EvalResult]:
    """An eval session played to its end by a fixed linear policy; (transport, trace, result)."""
    env = RemoteEnv(
        AleClient(running.agent_address, running.agent_token, task_id=task_id, run_id=RUN),
        kind="eval",
        own_client=True,
    )
    space = env.action_space
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    dim = int(np.prod(env.observation_space.shape))
    weights = np.random.default_rng(7).uniform(-0.3, 0.3, (int(np.prod(space.shape)), dim))
    trace: list[Any] = []
    transport = env.transport
    try:
        while not env.eval_complete:
            obs, info = env.reset(seed=123)  # ignored: hidden seeds
            trace.append(("reset", obs, info))
            done = False
            while not done:
                act = np.clip(weights @ np.asarray(obs, np.float64).ravel(), low, high)
                obs, reward, terminated, truncated, info = env.step(
                    act.reshape(space.shape).astype(space.dtype)
                )
                trace.append(("step", obs, reward, terminated, truncated, info))
                done = terminated or truncated
    finally:
        env.close()
    harness = AleClient(running.harness_address, running.harness_token, run_id=RUN)
    try:
        r = harness.stub.GetEvalResult(
            pb.GetEvalResultRequest(run_id=RUN), metadata=harness.metadata
        )
    finally:
        harness.close()
    return transport, trace, EvalResult.model_validate_json(r.eval_result_json)


def _equal(x: Any, y: Any) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    if isinstance(x, tuple | list):
        return len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y, strict=True))
    return bool(x == y) or (x != x and y != y)  # NaN == NaN here


@pytest.mark.parametrize(
    "task_id",
    [t if t == FAST else pytest.param(t, marks=pytest.mark.slow) for t in INTERACTIVE],
)
def test_hidden_seed_results_are_bit_identical_over_both_transports(
    task_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tempfile.TemporaryDirectory(prefix="ale-par-") as d:
        with _evaluator(task_id, Path(d) / "shm") as running:
            shm = _play(running, task_id)
        monkeypatch.setenv("ALE_TRANSPORT", "grpc")
        with _evaluator(task_id, Path(d) / "grpc") as running:
            grpc_ = _play(running, task_id)
    assert (shm[0], grpc_[0]) == ("shm", "stream")
    assert len(shm[1]) == len(grpc_[1]) > 2
    for i, (a, b) in enumerate(zip(shm[1], grpc_[1], strict=True)):
        assert _equal(a, b), f"entry {i} differs: {a} != {b}"
    mine, theirs = shm[2], grpc_[2]
    assert mine.secret_sha256 == theirs.secret_sha256 and len(mine.episodes) == 2
    assert [e.model_dump() for e in mine.episodes] == [e.model_dump() for e in theirs.episodes]
    assert mine.metrics == theirs.metrics
