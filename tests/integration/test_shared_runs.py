"""Two runs on one shared evaluator, over real gRPC on real Unix sockets (issue 12, point 5).

A shared evaluator (``evaluator serve`` without ``--run-id``) used to give every
run the same agent token and the same submission volume: one run's agent could
step and close another run's sessions, query its jobs, read its files, and fill
the session limit so that the next run failed. Here the harness opens each run
(OpenRun) and every agent call is bound to its token's run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.client import AleClient, RemoteEnv, RunGrant
from ale_robotics.errors import (
    FailedPreconditionError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import Registry
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

BATCH = "td3-inverted-pendulum-v1"
INTERACTIVE = "td3-inverted-double-pendulum-v1"
_runs = iter(range(1_000_000))


@pytest.fixture(scope="module")
def shared(registry: Registry) -> Iterator[RunningEvaluator]:
    """A shared evaluator as ``evaluator serve`` without --run-id starts it (all tasks)."""
    with tempfile.TemporaryDirectory(prefix="ale-sr-") as d:
        volume = Path(d) / "vol"
        volume.mkdir()
        running = serve(
            EvaluatorConfig(
                Path(d) / "state",
                volume,
                workers=1,
                per_run_tokens=True,
                max_submissions_per_run=20,
            ),
            agent_listen=f"unix://{d}/a/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=registry,
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)


def harness(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.harness_address, ev.harness_token)


def open_run(ev: RunningEvaluator, task_id: str) -> RunGrant:
    """Open a run that stays open after this helper (raw OpenRun, not the closing client)."""
    run_id = f"run-sr-{next(_runs)}"
    with harness(ev) as h:
        r = h._call(h.stub.OpenRun, pb.OpenRunRequest(run_id=run_id, task_id=task_id))
    return RunGrant(r.run_id, r.task_id, r.agent_token, r.submission_dir, r.submission_subdir)


def agent(ev: RunningEvaluator, grant: RunGrant, run_id: str = "") -> AleClient:
    """The agent of a run as the harness launches it: the run's token, the run's dir.

    ``run_id`` stays empty unless a test names one: the token alone says which run."""
    return AleClient(
        ev.agent_address,
        grant.agent_token,
        run_id=run_id,
        submission_dir=grant.submission_dir,
    )


def practice(c: AleClient, run_id: str = "") -> str:
    r = c._call(
        c.stub.OpenSession,
        pb.OpenSessionRequest(
            task_id=c.task_id, kind=pb.SESSION_KIND_PRACTICE, num_envs=1, run_id=run_id
        ),
    )
    return str(r.session_id)


def not_found_message(c: AleClient, call: str, session_id: str) -> str:
    request = (
        pb.StepRequest(session_id=session_id, action=to_tensor(np.zeros((1, 1), np.float32)))
        if call == "Step"
        else pb.ResetRequest(session_id=session_id)
        if call == "Reset"
        else pb.CloseSessionRequest(session_id=session_id)
    )
    with pytest.raises(NotFoundError) as info:
        c._call(getattr(c.stub, call), request)
    return info.value.message.replace(session_id, "<id>")


def write_policy(directory: Path, seed: int = 0) -> None:
    from ale_robotics.tasks import default_registry

    directory.mkdir(parents=True, exist_ok=True)
    weights = random_weights(default_registry().get(BATCH), seed=seed, scale=0.3)
    save_file(weights, str(directory / "policy.safetensors"))


def test_run_token_cannot_touch_another_runs_sessions(shared: RunningEvaluator) -> None:
    a, b = open_run(shared, INTERACTIVE), open_run(shared, INTERACTIVE)
    with agent(shared, a) as ca, agent(shared, b) as cb:
        sid_b = practice(cb)
        cb._call(cb.stub.Reset, pb.ResetRequest(session_id=sid_b, seeds=[3]))
        never = "sess-" + "0" * 32
        for call in ("Reset", "Step", "CloseSession"):
            # indistinguishable from an id that never existed: same code, same words
            assert not_found_message(ca, call, sid_b) == not_found_message(ca, call, never)
        stream = ca.stub.StepStream(
            iter([pb.StepRequest(session_id=sid_b, action=to_tensor(np.zeros((1, 1), "f4")))]),
            metadata=ca.metadata,
        )
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        # B's session is intact and still B's
        cb._call(
            cb.stub.Step, pb.StepRequest(session_id=sid_b, action=to_tensor(np.zeros((1, 1), "f4")))
        )
        # a token acts for its own run only, whatever run_id the request names
        with pytest.raises(PermissionDeniedError, match="acts for run"):
            practice(ca, run_id=b.run_id)
        with pytest.raises(PermissionDeniedError, match="acts for run"):
            ca._call(
                ca.stub.OpenSession,
                pb.OpenSessionRequest(kind=pb.SESSION_KIND_EVAL, run_id=b.run_id),
            )
        assert practice(ca, run_id=a.run_id)  # naming its own run is fine
    with harness(shared) as h:
        closed = h._call(h.stub.CloseSession, pb.CloseSessionRequest(run_id=b.run_id))
    assert closed.sessions_closed == 1


def test_run_token_cannot_query_another_runs_job(shared: RunningEvaluator) -> None:
    a, b = open_run(shared, BATCH), open_run(shared, BATCH)
    write_policy(Path(b.submission_dir))
    with agent(shared, b) as cb:
        job_b = cb.submit(client_token="b-1")
        assert cb.wait(job_b, timeout_s=120, poll_s=0.05).state == "SUCCEEDED"
    with agent(shared, a) as ca:
        for job_id in (job_b, "job-0000000000000000"):
            with pytest.raises(NotFoundError) as info:
                ca.status(job_id)
            assert info.value.message == f"no job {job_id!r}"
        with pytest.raises(NotFoundError, match="has no batch job yet"):
            ca.status()  # the token's run, which has no job; never B's newest
        with pytest.raises(PermissionDeniedError):
            ca._call(ca.stub.GetBatchEvalStatus, pb.GetBatchEvalStatusRequest(run_id=b.run_id))
        with pytest.raises(PermissionDeniedError):
            ca._call(
                ca.stub.SubmitBatchEval,
                pb.SubmitBatchEvalRequest(run_id=b.run_id, client_token="steal"),
            )
        with pytest.raises(PermissionDeniedError):
            ca._call(ca.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job_b))
    with harness(shared) as h:  # the trusted harness reads every run's job
        assert h.status(job_b).state == "SUCCEEDED"


def test_each_run_has_its_own_fresh_submission_dir(shared: RunningEvaluator) -> None:
    volume = shared.evaluator.config.submission_volume
    assert volume is not None
    write_policy(volume)  # a file at the volume root, as an earlier shared run left it
    b = open_run(shared, BATCH)
    write_policy(Path(b.submission_dir), seed=1)
    a = open_run(shared, BATCH)
    assert Path(a.submission_dir) == volume / a.run_id and a.submission_subdir == a.run_id
    assert Path(b.submission_dir) == volume / b.run_id
    assert list(Path(a.submission_dir).iterdir()) == []  # new and empty
    assert Path(a.submission_dir).stat().st_mode & 0o777 == 0o700
    with agent(shared, a) as ca:
        # A's paths start at A's directory: neither B's files nor the volume root's
        for n, path in enumerate(("", b.run_id, f"../{b.run_id}", "..")):
            req = pb.SubmitBatchEvalRequest(submission_path=path, client_token=f"a-{n}")
            job = ca._call(ca.stub.SubmitBatchEval, req).job_id  # raw: the SDK normalizes
            st = ca.wait(job, timeout_s=60, poll_s=0.05)
            assert st.state == "REJECTED", path
            assert st.failure_source == "submission"
    # run ids are single use: a second OpenRun (same id) is refused, the dir is not reused
    with harness(shared) as h, pytest.raises(FailedPreconditionError, match="single use"):
        h._call(h.stub.OpenRun, pb.OpenRunRequest(run_id=a.run_id, task_id=BATCH))


def test_practice_sessions_of_one_run_do_not_starve_another(shared: RunningEvaluator) -> None:
    a, b = open_run(shared, INTERACTIVE), open_run(shared, INTERACTIVE)
    with agent(shared, a) as ca, agent(shared, b) as cb:
        limit = ca.get_spec().raw.limits.max_sessions
        assert limit == 8
        mine = [practice(ca) for _ in range(limit)]  # run_id "" : the token's run
        with pytest.raises(ResourceExhaustedError) as info:
            practice(ca)
        msg = info.value.message
        assert f"run {a.run_id!r}" in msg and "max_sessions = 8 per run" in msg
        assert all(sid in msg for sid in mine)  # says which sessions are open
        # run B is untouched by A's sessions: practice and its eval session open
        env = RemoteEnv(agent(shared, b), kind="practice", own_client=True)
        env.reset(seed=1)
        env.close()
        cb._call(cb.stub.OpenSession, pb.OpenSessionRequest(kind=pb.SESSION_KIND_EVAL))
    # the harness closes everything of run A, the run_id="" sessions included
    with harness(shared) as h:
        closed = h._call(h.stub.CloseSession, pb.CloseSessionRequest(run_id=a.run_id))
        assert closed.sessions_closed == limit
        h._call(h.stub.CloseSession, pb.CloseSessionRequest(run_id=b.run_id))
    with agent(shared, a) as ca:
        practice(ca)


def test_shared_agent_token_reaches_no_run(shared: RunningEvaluator) -> None:
    a, i = open_run(shared, BATCH), open_run(shared, INTERACTIVE)
    write_policy(Path(a.submission_dir))
    with agent(shared, a) as ca, agent(shared, i) as ci:
        job_a = ca.submit(client_token="a")
        sid_i = practice(ci)
    legacy = AleClient(shared.agent_address, shared.agent_token, task_id=BATCH)
    with legacy:
        assert legacy.get_spec().task.id == BATCH
        for request_run in ("", a.run_id, "some-other-run"):
            with pytest.raises(PermissionDeniedError, match="OpenRun"):
                legacy._call(
                    legacy.stub.SubmitBatchEval,
                    pb.SubmitBatchEvalRequest(task_id=BATCH, run_id=request_run, client_token="x"),
                )
        with pytest.raises(PermissionDeniedError):
            legacy.status(job_a)
        with pytest.raises(PermissionDeniedError):
            legacy._call(
                legacy.stub.GetBatchEvalStatus, pb.GetBatchEvalStatusRequest(run_id=a.run_id)
            )
        with pytest.raises(NotFoundError):
            legacy._call(legacy.stub.Reset, pb.ResetRequest(session_id=sid_i))
    with AleClient(shared.agent_address, shared.agent_token, task_id=INTERACTIVE) as legacy:
        with pytest.raises(PermissionDeniedError):
            legacy._call(
                legacy.stub.OpenSession,
                pb.OpenSessionRequest(task_id=INTERACTIVE, kind=pb.SESSION_KIND_EVAL),
            )
        # nor run-less practice (issue 26: every embedded run used to hand this token out)
        with pytest.raises(PermissionDeniedError, match="allow-practice-without-run"):
            practice(legacy)
    with harness(shared) as h:
        for run in (a, i):
            h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id=run.run_id))


def test_close_run_revokes_the_token_and_closes_sessions(shared: RunningEvaluator) -> None:
    a = open_run(shared, INTERACTIVE)
    with agent(shared, a) as ca:
        practice(ca)
        practice(ca)
    with harness(shared) as h:
        assert h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id=a.run_id)).sessions_closed == 2
    with agent(shared, a) as ca, pytest.raises(UnauthenticatedError):
        ca.get_spec()
    # the agent channel refuses OpenRun and CloseRun
    b = open_run(shared, INTERACTIVE)
    with agent(shared, b) as cb:
        with pytest.raises(PermissionDeniedError, match="harness-channel"):
            cb._call(cb.stub.OpenRun, pb.OpenRunRequest(run_id="run-x", task_id=INTERACTIVE))
        with pytest.raises(PermissionDeniedError, match="harness-channel"):
            cb._call(cb.stub.CloseRun, pb.CloseRunRequest(run_id=b.run_id))


def test_harness_client_closes_the_runs_it_opened(shared: RunningEvaluator) -> None:
    with harness(shared) as h:
        spec = AleClient(shared.harness_address, shared.harness_token, task_id=BATCH).get_spec()
        assert {"open_run", "coarse_progress"} <= set(spec.raw.capabilities)
        grant = h.open_run(f"run-sr-{next(_runs)}", BATCH)
        with agent(shared, grant) as c:
            assert c.get_spec().task.id == BATCH  # the run's task by default
    with agent(shared, grant) as c, pytest.raises(UnauthenticatedError):
        c.get_spec()
