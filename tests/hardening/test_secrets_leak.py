"""The secret, the tokens and the raw hidden seeds never show up where they must not.

Greps every log record of an in-process evaluator, every status and error the
agent channel returns, every file the agent can read (the submission dir, and
for a real ``run_task`` the agent's log and environment) for the secret (hex,
upper-case hex and raw bytes), the raw seeds (decimal and hex), the harness
token, and (in logs) the agent token. Tokens are compared in constant time;
behaviourally: a token one character off is UNAUTHENTICATED.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import grpc
import pytest
from hardening_helpers import (
    RUN,
    TASK_ID,
    forbidden_strings,
    official,
    stable_weights,
    wait,
    write_policy,
)
from helpers import random_weights

from ale_robotics.client import AleClient
from ale_robotics.errors import AleError
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.evaluator.server.auth import AuthInterceptor
from ale_robotics.harness.run import RunOptions, run_task
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb


def _assert_clean(blob: str, never: list[str], what: str) -> None:
    for value in never:
        assert value not in blob, f"{what} contains a forbidden value"


def test_logs_statuses_errors_and_files_hold_no_secret(
    short_tmp: Path, registry: Registry, task: TaskSpec, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    volume = short_tmp / "vol"
    ev = serve(
        EvaluatorConfig(
            short_tmp / "state", volume, task_id=TASK_ID, run_id=RUN, workers=1, max_attempts=2
        ),
        agent_listen=f"unix://{short_tmp}/agent/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    seen: list[str] = []  # everything the agent channel told the agent
    try:
        write_policy(volume / "good", random_weights(task, scale=0.3))
        write_policy(volume / "slow", stable_weights(task))
        (volume / "bad").mkdir()
        (volume / "bad" / "policy.pt").write_bytes(b"PK\x03\x04 not really")
        with AleClient(ev.agent_address, ev.agent_token, run_id=RUN) as c:
            seen.append(str(c.get_spec().raw))
            for rel in ("good", "bad"):
                st = c.wait(c.submit(rel), timeout_s=90, on_progress=lambda s: seen.append(repr(s)))
                seen.append(repr(st))
            # an infrastructure failure and its retry also get logged
            job = c.submit("slow")
            deadline = time.monotonic() + 30
            while not ev.evaluator.pool.worker_pids() and time.monotonic() < deadline:
                time.sleep(0.005)
            for pid in ev.evaluator.pool.worker_pids():
                os.kill(pid, signal.SIGKILL)
            seen.append(repr(wait(c, job)))
            for call, req in [
                (c.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job)),
                (c.stub.GetBatchEvalStatus, pb.GetBatchEvalStatusRequest(job_id="job-nope")),
                (c.stub.GetBatchEvalStatus, pb.GetBatchEvalStatusRequest(run_id="other")),
                (c.stub.SubmitBatchEval, pb.SubmitBatchEvalRequest(client_token="\x01")),
                (c.stub.GetSpec, pb.GetSpecRequest(task_id="nope-v1")),
                (c.stub.OpenSession, pb.OpenSessionRequest(kind=99)),
            ]:
                try:
                    seen.append(str(c._call(call, req)))
                except AleError as exc:
                    seen.append(exc.message)
        with AleClient(ev.agent_address, "wrong") as bad:
            with pytest.raises(AleError) as info:
                bad.get_spec()
            seen.append(info.value.message)
        result_json = official(ev.harness_address, ev.harness_token, job).model_dump_json()
        secret = ev.evaluator._secret
        agent_token, harness_token = ev.agent_token, ev.harness_token
    finally:
        ev.stop(grace=0.5)

    never = forbidden_strings(task, RUN, secret)
    files = [p.read_bytes().decode("latin-1") for p in volume.rglob("*") if p.is_file()]
    _assert_clean("\n".join(seen), [*never, harness_token], "an agent-channel answer")
    _assert_clean("\n".join(files), [*never, harness_token], "the submission dir")
    logs = "\n".join(
        [
            caplog.text,
            *(r.getMessage() for r in caplog.records),
            *(r.exc_text or "" for r in caplog.records),
        ]
    )
    _assert_clean(logs, [*never, agent_token, harness_token], "the evaluator's log")
    assert "infrastructure" in logs  # the crash was logged (so the grep saw real content)
    _assert_clean(result_json, never, "the official result")  # commitments only


AGENT = """
import json, os, sys
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
env = dict(os.environ)
print(json.dumps(env))
sub = os.environ["ALE_SUBMISSION_DIR"]
json.dump(env, open(os.path.join(sub, "env.json"), "w"))
c = AleClient.from_env()
spec = c.get_spec()
rng = np.random.default_rng(0)
save_file({r.key: (rng.standard_normal(r.shape) * 0.3).astype(r.dtype)
           for r in spec.contract.tensors}, os.path.join(sub, "policy.safetensors"))
st = c.wait(c.submit(), timeout_s=120)
print(st)
"""


def test_run_task_agent_sees_no_harness_secret(
    short_tmp: Path, registry: Registry, task: TaskSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real harness run: the agent's environment, log and files carry no evaluator secret."""
    script = short_tmp / "agent.py"
    script.write_text(AGENT)
    monkeypatch.chdir(short_tmp)
    outcome = run_task(
        RunOptions(
            task_id=TASK_ID,
            agent_cmd=f"{sys.executable} {script}",
            run_dir=short_tmp / "run",
            state_dir=short_tmp / "state",
            workers=1,
            budget_s=120,
        ),
        registry=registry,
    )
    assert outcome.report.job_state == "SUCCEEDED", (outcome.run_dir / "agent.log").read_text()
    state = short_tmp / "state"
    secret = (state / "secret").read_bytes()
    harness_token = (state / "harness.token").read_text().strip()
    run_id = outcome.run_id
    never = [*forbidden_strings(task, run_id, secret), harness_token]
    env = json.loads((outcome.run_dir / "submission" / "env.json").read_text())
    # the run's own token: no token file of the state dir (issue 26)
    assert env["ALE_TOKEN"] not in "".join(p.read_text() for p in state.glob("*.token"))
    assert not any(str(state) in v for v in env.values())  # not even the state dir's path
    readable = [
        (outcome.run_dir / "agent.log").read_text(),
        json.dumps(env),
        *(p.read_bytes().decode("latin-1") for p in (outcome.run_dir / "submission").rglob("*")),
    ]
    _assert_clean("\n".join(readable), never, "what the agent could read")


def test_auth_uses_constant_time_comparison() -> None:
    assert "hmac.compare_digest" in inspect.getsource(AuthInterceptor)


def test_token_one_character_off_is_unauthenticated(short_tmp: Path, registry: Registry) -> None:
    ev = serve(
        EvaluatorConfig(short_tmp / "state", short_tmp / "vol", task_id=TASK_ID, run_id=RUN),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        for address, token in (
            (ev.agent_address, ev.agent_token),
            (ev.harness_address, ev.harness_token),
        ):
            last = "A" if token[-1] != "A" else "B"
            first = "A" if token[0] != "A" else "B"
            variants = [
                token[:-1] + last,
                first + token[1:],
                token[:-1],
                token + "x",
                token.upper(),
            ]
            if token.upper() == token:
                variants.pop()
            with grpc.insecure_channel(address) as ch:
                stub = ch.unary_unary(
                    "/ale_robotics.v1.AleEnv/GetSpec",
                    request_serializer=pb.GetSpecRequest.SerializeToString,
                    response_deserializer=pb.GetSpecResponse.FromString,
                )
                for wrong in [*variants, f"bearer {token}"]:
                    header = wrong if wrong.startswith("bearer ") else f"Bearer {wrong}"
                    with pytest.raises(grpc.RpcError) as info:
                        stub(pb.GetSpecRequest(), metadata=(("authorization", header),), timeout=10)
                    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
                    assert token not in (info.value.details() or "")
                ok = stub(
                    pb.GetSpecRequest(),
                    metadata=(("authorization", f"Bearer {token}"),),
                    timeout=10,
                )
                assert ok.task_id == TASK_ID
    finally:
        ev.stop(grace=0.5)
