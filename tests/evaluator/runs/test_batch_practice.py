"""Practice sessions on a batch task whose simulator runs only in the evaluator.

td3-walker2d-repro-v1 hides MuJoCo from its agent (training.simulator "evaluator"), so
the agent trains through practice sessions of the SDK, over real gRPC on real Unix
sockets, stepping real MuJoCo in the evaluator, which counts every step against the
manifest budget. The task stays a batch task: it is evaluated on its submission, and an
eval session on it is refused. A batch task whose agent simulates itself still offers
no session at all.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv
from ale_robotics.errors import FailedPreconditionError, NotFoundError, ResourceExhaustedError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import Registry, default_registry, load_manifest
from ale_robotics.tasks.manifest import ReleaseManifest
from ale_robotics.v1 import ale_env_pb2 as pb

REPRO = "td3-walker2d-repro-v1"
RUN = "run-bpractice-1"


@contextlib.contextmanager
def _evaluator(registry: Registry, task_id: str = REPRO) -> Iterator[RunningEvaluator]:
    """A real evaluator bound to one run of ``task_id``, as the harness starts one."""
    with tempfile.TemporaryDirectory(prefix="ale-bp-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=task_id, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=registry,
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)


@pytest.fixture(scope="module")
def repro() -> Iterator[RunningEvaluator]:
    with _evaluator(default_registry()) as running:
        yield running


def _agent(ev: RunningEvaluator, task_id: str = REPRO) -> AleClient:
    return AleClient(ev.agent_address, ev.agent_token, task_id=task_id, run_id=RUN)


def _budget_registry(steps: int) -> Registry:
    """The shipped walker2d config (its bytes: the manifest hash holds) with a small budget."""
    data = json.loads(load_manifest().model_dump_json())
    data["tasks"][REPRO]["compute_budget"]["training_steps"] = steps
    raw = default_registry().entry(REPRO).raw
    return Registry({"walker.json": raw}, ReleaseManifest.model_validate(data))


def test_a_practice_session_steps_mujoco_in_the_evaluator_and_every_step_counts(
    repro: RunningEvaluator,
) -> None:
    before = repro.evaluator.training.used(RUN)
    env = RemoteEnv(_agent(repro), own_client=True)
    try:
        assert env.seeds_ignored is False  # a practice session: the agent's own seeds
        obs, _ = env.reset(seed=11)
        assert obs.shape == (17,)
        other = RemoteEnv(_agent(repro), own_client=True)
        try:
            again, _ = other.reset(seed=11)
        finally:
            other.close()
        assert np.array_equal(obs, again)  # the agent's seed gives its start state
        rewards = []
        for _ in range(40):
            obs, reward, terminated, truncated, _ = env.step(np.zeros(6, np.float32))
            rewards.append(reward)
            if terminated or truncated:
                env.reset()
        assert all(np.isfinite(rewards)) and len(set(rewards)) > 1  # real physics moved
    finally:
        env.close()
    vec = RemoteVectorEnv(_agent(repro), num_envs=3, own_client=True)
    try:
        vec.reset(seed=0)
        for _ in range(5):
            vec.step(np.zeros((3, 6), np.float32))
    finally:
        vec.close()
    # 40 steps of one env, 5 of three envs: the run's count, the evaluator's own
    assert repro.evaluator.training.used(RUN) - before == 40 + 15
    with _agent(repro) as c:
        view = c.get_spec()
    assert view.training_agent_steps_used == repro.evaluator.training.used(RUN)
    assert view.training_steps_enforced and view.training_agent_steps == 1_000_000
    assert "an agent step is one env of one Step call of a practice session" in (
        view.training_budget
    )


def test_getspec_offers_practice_sessions_and_checkpoints_but_no_eval_session(
    repro: RunningEvaluator,
) -> None:
    with _agent(repro) as c:
        raw = c.get_spec().raw
    caps = set(raw.capabilities)
    assert raw.mode == "batch"  # still evaluated on its submission
    assert {"batch", "practice_sessions", "checkpoints", "step_stream", "watch_sessions"} <= caps
    assert "eval_sessions" not in caps and "interactive" not in caps
    task = default_registry().get(REPRO)
    assert task.session is not None
    assert raw.limits.max_envs_per_session == task.session.max_envs_per_session
    assert raw.limits.eval_episodes == 0  # no eval session to size
    assert raw.submission_contract_json  # the contract is still what it grades


def test_an_eval_session_on_the_batch_task_is_refused_with_the_reason(
    repro: RunningEvaluator,
) -> None:
    with pytest.raises(FailedPreconditionError) as err:
        RemoteEnv(_agent(repro), kind="eval", own_client=True)
    message = str(err.value)
    assert f"task {REPRO} is a batch task, not interactive" in message
    assert "practice sessions only" in message and "never an eval session" in message
    assert "SubmitBatchEval" in message
    with _agent(repro) as c, pytest.raises(FailedPreconditionError, match="never an eval"):
        c._call(
            c.stub.OpenSession,
            pb.OpenSessionRequest(task_id=REPRO, kind=pb.SESSION_KIND_EVAL, num_envs=1, run_id=RUN),
        )
    with _agent(repro) as c, pytest.raises(NotFoundError):
        c.status()  # no eval job was opened for the run by the refused sessions


def test_practice_past_the_budget_is_resource_exhausted() -> None:
    with _evaluator(_budget_registry(12)) as ev:
        env = RemoteVectorEnv(_agent(ev), num_envs=4, own_client=True)
        try:
            env.reset(seed=1)
            for _ in range(3):
                env.step(np.zeros((4, 6), np.float32))  # 12: exactly the budget
            with pytest.raises(ResourceExhaustedError) as err:
                env.step(np.zeros((4, 6), np.float32))
            with pytest.raises(ResourceExhaustedError, match="used up"):
                env.reset(seed=2)
        finally:
            env.close()
        assert ev.evaluator.training.used(RUN) == 12
    message = str(err.value)
    assert f"run {RUN} has taken 12 of its 12 agent steps" in message
    assert "would make it 16, so it is refused" in message


def test_a_batch_task_whose_agent_simulates_offers_no_session(registry: Registry) -> None:
    with _evaluator(registry, "td3-inverted-pendulum-v1") as ev:
        client = _agent(ev, "td3-inverted-pendulum-v1")
        caps = set(client.get_spec().raw.capabilities)
        assert "practice_sessions" not in caps and "checkpoints" not in caps
        for kind in ("practice", "eval"):
            with pytest.raises(FailedPreconditionError, match="it offers no sessions"):
                RemoteEnv(client, kind=kind)  # type: ignore[arg-type]
        client.close()
