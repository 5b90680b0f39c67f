"""Batch mode over real gRPC on real Unix sockets: roles, tokens, rejection, snapshots, seeds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.client import AleClient
from ale_robotics.errors import (
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb

RUN = "run-test-1"


def agent(ev: RunningEvaluator, token: str | None = None) -> AleClient:
    volume = ev.evaluator.config.submission_volume
    return AleClient(
        ev.agent_address,
        ev.agent_token if token is None else token,
        task_id="td3-inverted-pendulum-v1",
        run_id=RUN,
        submission_dir=volume,
    )


def harness(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.harness_address, ev.harness_token, run_id=RUN)


def official(ev: RunningEvaluator, job_id: str) -> EvalResult:
    with harness(ev) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job_id))
    assert r.official
    return EvalResult.model_validate_json(r.eval_result_json)


def write_policy(ev: RunningEvaluator, task: TaskSpec, seed: int = 0, sub: str = "") -> Path:
    volume = ev.evaluator.config.submission_volume
    assert volume is not None
    d = volume / sub
    d.mkdir(parents=True, exist_ok=True)
    path = d / "policy.safetensors"
    if path.exists():
        path.unlink()
    save_file(random_weights(task, seed=seed, scale=0.3), str(path))
    return path


def test_get_spec_serves_contract_and_spaces(evaluator: RunningEvaluator) -> None:
    with agent(evaluator) as c:
        spec = c.get_spec()
    assert spec.task.id == "td3-inverted-pendulum-v1"
    assert spec.contract is not None and "policy.safetensors" in spec.contract.files[0].names
    assert list(spec.raw.observation_spec.shape) == [4]
    assert list(spec.raw.action_spec.shape) == [1]
    assert spec.budget_s > 0 and spec.max_message_bytes > 0
    assert spec.protocol_version == "ale_robotics.v1"


def test_agent_channel_cannot_read_results(evaluator: RunningEvaluator, task: TaskSpec) -> None:
    write_policy(evaluator, task)
    with agent(evaluator) as c:
        job = c.submit()
        c.wait(job, timeout_s=120)
        with pytest.raises(PermissionDeniedError, match="harness channel"):
            c._call(c.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job))
    assert official(evaluator, job).state == "SUCCEEDED"


@pytest.mark.parametrize("token", ["", "wrong"])
def test_wrong_or_missing_token_is_unauthenticated(evaluator: RunningEvaluator, token: str) -> None:
    with agent(evaluator, token=token) as c, pytest.raises(UnauthenticatedError):
        c.get_spec()
    with (
        AleClient(evaluator.harness_address, evaluator.agent_token) as h,
        pytest.raises(UnauthenticatedError),
    ):
        h.status("x")


def test_rejection_names_file_key_and_rule(evaluator: RunningEvaluator, task: TaskSpec) -> None:
    volume = evaluator.evaluator.config.submission_volume
    assert volume is not None
    w = random_weights(task)
    w["l1.weight"] = w["l1.weight"][:, :3].copy()
    save_file(w, str(volume / "policy.safetensors"))
    with agent(evaluator) as c:
        st = c.wait(c.submit(), timeout_s=60)
    assert st.state == "REJECTED"
    assert st.failure_source == "submission"
    assert "policy.safetensors" in st.failure_reason
    assert "l1.weight" in st.failure_reason
    assert "rule: tensor shape" in st.failure_reason


def test_unsafe_path_is_rejected_and_service_goes_on(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    req = pb.SubmitBatchEvalRequest(run_id=RUN, submission_path="../..", client_token="t-up")
    with agent(evaluator) as c:
        st = c.wait(c._call(c.stub.SubmitBatchEval, req).job_id, timeout_s=30)
    assert st.state == "REJECTED" and "rule: path" in st.failure_reason
    write_policy(evaluator, task)
    with agent(evaluator) as c:
        assert c.wait(c.submit(), timeout_s=120).state == "SUCCEEDED"


def test_changing_files_after_submit_changes_nothing(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    path = write_policy(evaluator, task, seed=1)
    with agent(evaluator) as c:
        job_a = c.submit("", client_token="a")
        save_file(random_weights(task, seed=99, scale=0.3), str(path))  # overwrite right away
        c.wait(job_a, timeout_s=120)
    first = official(evaluator, job_a)
    write_policy(evaluator, task, seed=1)
    with agent(evaluator) as c:
        job_b = c.submit("", client_token="b")
        c.wait(job_b, timeout_s=120)
    second = official(evaluator, job_b)
    assert first.submission_files == second.submission_files
    assert first.metrics == second.metrics
    assert [e.episode_return for e in first.episodes] == [e.episode_return for e in second.episodes]


def test_same_run_secret_submission_gives_identical_results(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    write_policy(evaluator, task, seed=5)
    results = []
    with agent(evaluator) as c:
        for token in ("x1", "x2"):
            job = c.submit(client_token=token)
            c.wait(job, timeout_s=120)
            results.append(official(evaluator, job))
    a, b = (r.model_dump(include={"metrics", "episodes", "submission_files"}) for r in results)
    assert a == b
    assert len(results[0].episodes) == task.eval.episodes


def test_submit_is_idempotent_on_client_token(evaluator: RunningEvaluator, task: TaskSpec) -> None:
    write_policy(evaluator, task)
    with agent(evaluator) as c:
        first = c.submit(client_token="same")
        again = c.submit(client_token="same")
    assert first == again


def test_agent_status_never_carries_a_metric(evaluator: RunningEvaluator, task: TaskSpec) -> None:
    write_policy(evaluator, task)
    with agent(evaluator) as c:
        job = c.submit()
        c.wait(job, timeout_s=120)
        raw = c._call(c.stub.GetBatchEvalStatus, pb.GetBatchEvalStatusRequest(job_id=job))
    assert raw.state == pb.JOB_STATE_SUCCEEDED
    assert {f.name for f in raw.DESCRIPTOR.fields}.isdisjoint({"metrics", "eval_result_json"})


def test_raw_hidden_seeds_appear_nowhere_the_agent_can_read(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    write_policy(evaluator, task)
    seen: list[str] = []
    with agent(evaluator) as c:
        spec = c.get_spec()
        seen.append(str(spec.raw))
        job = c.submit()
        st = c.wait(job, timeout_s=120, on_progress=lambda s: seen.append(repr(s)))
        seen.append(repr(st))
        for bad in (pb.GetEvalResultRequest(job_id=job), pb.GetEvalResultRequest(run_id="zz")):
            try:
                c._call(c.stub.GetEvalResult, bad)
            except PermissionDeniedError as exc:
                seen.append(exc.message)
        try:
            c.status("job-nope")
        except NotFoundError as exc:
            seen.append(exc.message)
    volume = evaluator.evaluator.config.submission_volume
    assert volume is not None
    for p in volume.rglob("*"):
        if p.is_file():
            seen.append(p.read_bytes().decode("latin-1"))
    secret = evaluator.evaluator._secret
    raw_seeds = [s.value for s in derive_seeds(task.eval.base_seeds, RUN, secret)]
    blob = "\n".join(seen)
    for value in raw_seeds:
        assert str(value) not in blob
        assert f"{value:x}" not in blob
    assert secret.hex() not in blob
    # the official result carries commitments, never the seeds themselves
    res_text = official(evaluator, job).model_dump_json()
    for value in raw_seeds:
        assert str(value) not in res_text


def test_invalid_requests_get_precise_codes(evaluator: RunningEvaluator) -> None:
    with agent(evaluator) as c:
        with pytest.raises(InvalidArgumentError, match="client_token"):
            c._call(c.stub.SubmitBatchEval, pb.SubmitBatchEvalRequest(run_id=RUN))
        with pytest.raises(PermissionDeniedError, match="only accepts run"):
            c._call(
                c.stub.SubmitBatchEval,
                pb.SubmitBatchEvalRequest(run_id="other-run", client_token="k"),
            )
        with pytest.raises(NotFoundError):
            c._call(c.stub.GetSpec, pb.GetSpecRequest(task_id="nope-v1"))


def test_health_and_reflection_are_served(evaluator: RunningEvaluator) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    for addr in (evaluator.agent_address, evaluator.harness_address):
        with grpc.insecure_channel(addr) as ch:
            resp = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service="ale_robotics.v1.AleEnv"), timeout=5
            )
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
            stub = reflection_pb2_grpc.ServerReflectionStub(ch)
            (answer,) = stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
            names = {s.name for s in answer.list_services_response.service}
            assert "ale_robotics.v1.AleEnv" in names


def test_tokens_and_secret_files_are_private(evaluator: RunningEvaluator) -> None:
    root = evaluator.evaluator.state.root
    for name in ("harness.token", "secret", "signing_key.pem"):
        mode = os.stat(root / name).st_mode & 0o777
        assert mode == 0o600, f"{name} is {oct(mode)}"
    # bound to one run: its agent token is minted for the run, in memory only (issue 26)
    assert not (root / "agent.token").exists()
    assert evaluator.agent_token not in "".join(p.read_text() for p in root.glob("*.token"))
    assert evaluator.agent_token != evaluator.harness_token


def test_result_json_schema(evaluator: RunningEvaluator, task: TaskSpec) -> None:
    write_policy(evaluator, task)
    with agent(evaluator) as c:
        job = c.submit()
        c.wait(job, timeout_s=120)
    res = official(evaluator, job)
    data = json.loads(res.model_dump_json())
    assert data["official"] is True
    assert data["simulator_versions"]["mujoco"].startswith("3.")
    assert data["timings"]["env_steps"] == sum(e["length"] for e in data["episodes"])
    assert all(len(e["seed_commitment"]) == 64 for e in data["episodes"])
    assert res.events and res.events[0]["kind"] == "evaluator_key"


def test_submission_quota_is_resource_exhausted(short_tmp: Path, registry, task: TaskSpec) -> None:
    from ale_robotics.errors import ResourceExhaustedError
    from ale_robotics.evaluator import EvaluatorConfig, serve

    volume = short_tmp / "vol"
    volume.mkdir()
    ev = serve(
        EvaluatorConfig(
            short_tmp / "st",
            volume,
            task_id=task.id,
            run_id=RUN,
            workers=1,
            max_submissions_per_run=1,
        ),
        agent_listen=f"unix://{short_tmp}/qa.sock",
        harness_listen=f"unix://{short_tmp}/qh.sock",
        registry=registry,
    )
    try:
        write_policy(ev, task)
        with agent(ev) as c:
            first = c.submit(client_token="one")
            assert c.submit(client_token="one") == first  # a retry is not a new submission
            with pytest.raises(ResourceExhaustedError, match="max_submissions"):
                c.submit(client_token="two")
    finally:
        ev.stop(grace=0.5)
