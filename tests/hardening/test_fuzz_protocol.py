"""Protocol fuzzing: every RPC, both channels, against a real evaluator on Unix sockets.

Random field values, unknown enum values, tensors whose byte length does not
match their shape, huge and negative shapes, random ids, paths and tokens, and
raw bytes that are not a message at all. Every answer must be a precise status
(never INTERNAL or UNKNOWN, never a timeout or a dropped connection), no error
message or agent-channel response may contain the secret, a token the caller
should not have or a raw hidden seed, and the server must still serve GetSpec
and evaluate a valid job afterwards. The run RPCs (OpenRun, GetRunActivity, CloseRun) are fuzzed
like the rest, and a second, shared evaluator (per-run tokens) is fuzzed with
three callers: the harness, a run's own token and the shared agent token, which
reaches no run. Session RPCs may answer UNIMPLEMENTED
until interactive mode lands; any other precise code is fine for them too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hardening_helpers import RUN, TASK_ID, agent, forbidden_strings, wait, write_policy
from helpers import random_weights
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ale_robotics.client import AleClient
from ale_robotics.errors import PermissionDeniedError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb

# One worker for the whole module (make test runs --dist loadgroup): the last test checks what
# the fuzzers before it left in the module's caller.
pytestmark = pytest.mark.xdist_group("fuzz_protocol")

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples on every CI run: a failure is reproducible
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

BAD_CODES = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.DEADLINE_EXCEEDED,  # a hang
    grpc.StatusCode.UNAVAILABLE,  # a crash or a dropped connection
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DATA_LOSS,
}

SERVICE = "/ale_robotics.v1.AleEnv/"
METHODS = {
    "GetSpec": (pb.GetSpecRequest, pb.GetSpecResponse),
    "OpenSession": (pb.OpenSessionRequest, pb.OpenSessionResponse),
    "Reset": (pb.ResetRequest, pb.ResetResponse),
    "Step": (pb.StepRequest, pb.StepResponse),
    "CloseSession": (pb.CloseSessionRequest, pb.CloseSessionResponse),
    "SubmitBatchEval": (pb.SubmitBatchEvalRequest, pb.SubmitBatchEvalResponse),
    "GetBatchEvalStatus": (pb.GetBatchEvalStatusRequest, pb.GetBatchEvalStatusResponse),
    "GetEvalResult": (pb.GetEvalResultRequest, pb.GetEvalResultResponse),
    "OpenRun": (pb.OpenRunRequest, pb.OpenRunResponse),
    "GetRunActivity": (pb.GetRunActivityRequest, pb.GetRunActivityResponse),
    "CloseRun": (pb.CloseRunRequest, pb.CloseRunResponse),
}

_tokens = itertools.count()

# ------------------------------------------------------------ strategies --

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.one_of(
    st.text(max_size=40),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300),
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "../..",
            "/",
            "/etc/passwd",
            "a\x00b",
            "job-0000000000000000",
            "sess-0",
            RUN,
            TASK_ID,
            "x" * 129,
            "x" * 20_000,
            "%s%n%x",
            "' OR 1=1 --",
        ]
    ),
)
shapes = st.lists(
    st.one_of(st.integers(-3, 8), st.sampled_from([2**31, 2**40, 2**62, 2**63 - 1, -(2**63)])),
    max_size=6,
)
tensors = st.builds(
    pb.Tensor,
    dtype=st.one_of(st.integers(0, 8), int32),
    shape=shapes,
    data=st.binary(max_size=256),
)


def _requests() -> dict[str, st.SearchStrategy[Any]]:
    return {
        "GetSpec": st.builds(pb.GetSpecRequest, task_id=text),
        "OpenSession": st.builds(
            pb.OpenSessionRequest,
            task_id=st.one_of(st.just(""), text),
            kind=st.one_of(st.integers(0, 3), int32),
            num_envs=st.one_of(st.integers(-2, 4), int32),
            run_id=st.one_of(st.just(""), st.just(RUN), text),
        ),
        "Reset": st.builds(pb.ResetRequest, session_id=text, seeds=st.lists(int64, max_size=8)),
        "Step": st.builds(pb.StepRequest, session_id=text, action=tensors),
        "CloseSession": st.builds(pb.CloseSessionRequest, session_id=text),
        "SubmitBatchEval": st.builds(
            pb.SubmitBatchEvalRequest,
            task_id=st.one_of(st.just(""), st.just(TASK_ID), text),
            run_id=st.one_of(st.just(""), st.just(RUN), st.just(RUN), text),
            submission_path=st.one_of(st.sampled_from(["", ".", "sub", "./sub/"]), text),
            client_token=st.one_of(text, st.just("fuzz"), st.builds(lambda: f"fz-{next(_tokens)}")),
        ),
        "GetBatchEvalStatus": st.builds(
            pb.GetBatchEvalStatusRequest, job_id=text, run_id=st.one_of(st.just(RUN), text)
        ),
        "GetEvalResult": st.builds(
            pb.GetEvalResultRequest, job_id=text, run_id=st.one_of(st.just(RUN), text)
        ),
        "OpenRun": st.builds(
            pb.OpenRunRequest,
            run_id=st.one_of(
                st.just(""), st.just(RUN), st.builds(lambda: f"fz-{next(_tokens)}"), text
            ),
            task_id=st.one_of(st.just(""), st.just(TASK_ID), text),
        ),
        "GetRunActivity": st.builds(
            pb.GetRunActivityRequest, run_id=st.one_of(st.just(RUN), st.just(""), text)
        ),
        "CloseRun": st.builds(pb.CloseRunRequest, run_id=st.one_of(st.just(RUN), text)),
    }


REQUESTS = _requests()

# --------------------------------------------------------------- harness --


class Caller:
    """Raw unary calls on both channels with the right tokens; checks every answer."""

    def __init__(self, ev: RunningEvaluator, task: TaskSpec) -> None:
        self.ev = ev
        self.channels = {
            "agent": grpc.insecure_channel(ev.agent_address),
            "harness": grpc.insecure_channel(ev.harness_address),
        }
        self.tokens = {"agent": ev.agent_token, "harness": ev.harness_token}
        secret = ev.evaluator._secret
        self.never = forbidden_strings(task, RUN, secret)
        self.codes: dict[str, set[grpc.StatusCode]] = {}

    def close(self) -> None:
        for ch in self.channels.values():
            ch.close()

    def raw(self, role: str, method: str, body: bytes, token: str | None = None) -> Any:
        call = self.channels[role].unary_unary(
            SERVICE + method,
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        md = (("authorization", f"Bearer {self.tokens[role] if token is None else token}"),)
        try:
            resp = call(body, metadata=md, timeout=20)
        except grpc.RpcError as err:
            code, details = err.code(), err.details() or ""
            self.codes.setdefault(method, set()).add(code)
            assert code not in BAD_CODES, f"{method} on {role}: {code} {details!r}"
            self._no_leak(details, role, f"{method} error on {role}")
            return code
        self.codes.setdefault(method, set()).add(grpc.StatusCode.OK)
        parsed = METHODS[method][1].FromString(resp)
        if role != "harness":
            self._no_leak(str(parsed), role, f"{method} response on {role}")
        return parsed

    def raw_stream(self, role: str, bodies: list[bytes]) -> grpc.StatusCode:
        """Send raw request bytes on one StepStream; the status it ended with."""
        call = self.channels[role].stream_stream(
            SERVICE + "StepStream",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        md = (("authorization", f"Bearer {self.tokens[role]}"),)
        try:
            for resp in call(iter(bodies), metadata=md, timeout=20):
                if role == "agent":
                    self._no_leak(str(pb.StepResponse.FromString(resp)), role, "StepStream")
        except grpc.RpcError as err:
            code, details = err.code(), err.details() or ""
            self.codes.setdefault("StepStream", set()).add(code)
            assert code not in BAD_CODES, f"StepStream on {role}: {code} {details!r}"
            self._no_leak(details, role, f"StepStream error on {role}")
            return code
        self.codes.setdefault("StepStream", set()).add(grpc.StatusCode.OK)
        return grpc.StatusCode.OK

    def _no_leak(self, text: str, role: str, where: str) -> None:
        for value in self.never:
            assert value not in text, f"{where} leaks a secret or a raw seed"
        assert self.tokens["harness"] not in text, f"{where} leaks the harness token"
        if role == "harness" or "error" in where:
            assert self.tokens["agent"] not in text, f"{where} echoes the agent token"
        run_token = self.tokens.get("run")
        if run_token and (role != "run" or "error" in where):
            assert run_token not in text, f"{where} shows a run's token"


@pytest.fixture(scope="module")
def caller(shared_evaluator: RunningEvaluator, task: TaskSpec) -> Any:
    c = Caller(shared_evaluator, task)
    yield c
    c.close()


roles = st.sampled_from(["agent", "harness"])


def _keeps_the_run_open(request: Any) -> bool:
    """Not CloseRun of the bound run: that revokes its agent token for good (issue 26;
    tests/hardening/test_agent_tokens.py), and this module's last test needs it."""
    return not (isinstance(request, pb.CloseRunRequest) and request.run_id == RUN)


@pytest.mark.parametrize("method", list(METHODS))
def test_fuzzed_fields_get_precise_codes(caller: Caller, method: str) -> None:
    @SETTINGS
    @given(role=roles, request=REQUESTS[method].filter(_keeps_the_run_open))
    def run(role: str, request: Any) -> None:
        caller.raw(role, method, request.SerializeToString())

    if method == "SubmitBatchEval":  # one valid submit among the draws, whatever they are
        valid = pb.SubmitBatchEvalRequest(task_id=TASK_ID, run_id=RUN, client_token="fz-valid")
        run = example(role="agent", request=valid)(run)
    run()


@pytest.mark.parametrize("method", list(METHODS))
def test_raw_bytes_are_invalid_argument_or_parsed(caller: Caller, method: str) -> None:
    @SETTINGS
    @given(role=roles, body=st.binary(max_size=200))
    def run(role: str, body: bytes) -> None:
        caller.raw(role, method, body)

    run()


@SETTINGS
@given(
    role=roles,
    method=st.sampled_from(list(METHODS)),
    token=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=80),
)
def test_random_tokens_are_unauthenticated(
    caller: Caller, role: str, method: str, token: str
) -> None:
    request = METHODS[method][0]()
    code = caller.raw(role, method, request.SerializeToString(), token=token)
    assert code == grpc.StatusCode.UNAUTHENTICATED


def test_fuzzed_step_streams_end_with_precise_codes(caller: Caller) -> None:
    """Streams of fuzzed StepRequests and raw bytes: each ends with a precise status."""
    body = st.one_of(st.binary(max_size=120), REQUESTS["Step"].map(lambda r: r.SerializeToString()))

    @SETTINGS
    @given(role=roles, bodies=st.lists(body, min_size=1, max_size=4))
    def run(role: str, bodies: list[bytes]) -> None:
        caller.raw_stream(role, bodies)

    run()
    assert grpc.StatusCode.INVALID_ARGUMENT in caller.codes["StepStream"]


def test_tensor_edge_cases_on_step(caller: Caller) -> None:
    """Hand-picked tensors: length mismatch, overflowing shapes, unknown dtype."""
    cases = [
        pb.Tensor(dtype=pb.DTYPE_FLOAT32, shape=[1, 1], data=b"\0" * 3),
        pb.Tensor(dtype=pb.DTYPE_FLOAT32, shape=[2**62, 2**62], data=b""),
        pb.Tensor(dtype=pb.DTYPE_FLOAT32, shape=[-1], data=b""),
        pb.Tensor(dtype=99, shape=[1], data=b"\0" * 4),
        pb.Tensor(dtype=pb.DTYPE_BOOL, shape=[1, 1], data=b"\x02"),
    ]
    for role in ("agent", "harness"):
        for t in cases:
            caller.raw(role, "Step", pb.StepRequest(session_id="x", action=t).SerializeToString())


def test_server_still_serves_after_fuzzing(
    caller: Caller, shared_evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    """Runs last in this module: GetSpec answers and a valid job still succeeds."""
    spec = caller.raw("agent", "GetSpec", pb.GetSpecRequest().SerializeToString())
    assert spec.task_id == TASK_ID
    volume = shared_evaluator.evaluator.config.submission_volume
    assert volume is not None
    write_policy(volume / "after-fuzz", random_weights(task, seed=6, scale=0.3))
    with agent(shared_evaluator) as c:
        job = c.submit("after-fuzz", client_token=f"after-{next(_tokens)}")
        assert wait(c, job).state == "SUCCEEDED"
    # the fuzzers really reached the servicer, not only the parser
    seen = set().union(*caller.codes.values())
    assert grpc.StatusCode.INVALID_ARGUMENT in seen
    assert grpc.StatusCode.PERMISSION_DENIED in seen
    assert grpc.StatusCode.NOT_FOUND in seen
    assert grpc.StatusCode.OK in caller.codes["SubmitBatchEval"]


# ------------------------------------------------------ a shared evaluator --


@pytest.fixture(scope="module")
def shared_caller(module_tmp: Path, registry: Registry, task: TaskSpec) -> Iterator[Caller]:
    """A shared evaluator (per-run tokens, as ``evaluator serve`` without --run-id) with
    one open run, RUN, whose token is the caller role "run"."""
    volume = module_tmp / "shared-vol"
    volume.mkdir()
    ev = serve(
        EvaluatorConfig(
            module_tmp / "shared-state",
            volume,
            task_id=TASK_ID,
            workers=1,
            per_run_tokens=True,
            max_submissions_per_run=100_000,
        ),
        agent_listen=f"unix://{module_tmp}/sagent/a.sock",
        harness_listen=f"unix://{module_tmp}/sh.sock",
        registry=registry,
    )
    c = Caller(ev, task)
    opened = c.raw("harness", "OpenRun", pb.OpenRunRequest(run_id=RUN).SerializeToString())
    c.channels["run"] = grpc.insecure_channel(ev.agent_address)
    c.tokens["run"] = opened.agent_token
    try:
        yield c
    finally:
        c.close()
        ev.stop(grace=0.5)


shared_roles = st.sampled_from(["agent", "run", "harness"])


@pytest.mark.parametrize("method", list(METHODS))  # CloseRun last: it may revoke RUN's token
def test_fuzzed_fields_on_a_shared_evaluator(shared_caller: Caller, method: str) -> None:
    @settings(SETTINGS, max_examples=25)
    @given(role=shared_roles, request=REQUESTS[method])
    def run(role: str, request: Any) -> None:
        shared_caller.raw(role, method, request.SerializeToString())

    run()


def test_shared_evaluator_still_serves_after_fuzzing(shared_caller: Caller, task: TaskSpec) -> None:
    ev = shared_caller.ev
    run_id = f"after-{next(_tokens)}"
    opened = shared_caller.raw(
        "harness", "OpenRun", pb.OpenRunRequest(run_id=run_id).SerializeToString()
    )
    write_policy(Path(opened.submission_dir), random_weights(task, seed=7, scale=0.3))
    with AleClient(ev.agent_address, opened.agent_token, submission_dir=opened.submission_dir) as c:
        job = c.submit(client_token="after")
        assert wait(c, job).state == "SUCCEEDED"
    with (
        AleClient(ev.agent_address, ev.agent_token) as legacy,
        pytest.raises(PermissionDeniedError),
    ):
        legacy.status(job)
    seen = set().union(*shared_caller.codes.values())
    assert {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND} <= seen
    assert grpc.StatusCode.OK in shared_caller.codes["OpenRun"]
