"""The ``AleEnv`` gRPC servicer: a thin translation between protobuf and :class:`Evaluator`.

One servicer instance per listener, constructed with that listener's role; the
role is never read from a request. :class:`~ale_robotics.errors.AleError` becomes
its status code here (and only here); anything else is a bug, logged with its
traceback and answered INTERNAL without details, so nothing internal leaks.
"""

from __future__ import annotations

import functools
import hmac
import logging
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import numpy as np

from ale_robotics import PROTOCOL_VERSION
from ale_robotics.errors import AleError, PermissionDeniedError, UnimplementedError
from ale_robotics.evaluator.core import Evaluator
from ale_robotics.evaluator.store import FailureSource, JobRecord, JobState
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.tensors import proto_dtype, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

__all__ = ["AuthInterceptor", "Role", "make_servicer"]

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")

if TYPE_CHECKING:  # grpc-stubs make it generic; the runtime class is not subscriptable
    _InterceptorBase = grpc.ServerInterceptor[Any, Any]
else:
    _InterceptorBase = grpc.ServerInterceptor

_UNAUTHENTICATED_OK = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class Role(StrEnum):
    AGENT = "agent"
    HARNESS = "harness"


class AuthInterceptor(_InterceptorBase):
    """Refuses any AleEnv call without ``authorization: Bearer <token>`` of this listener."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

        def deny(_: Any, context: grpc.ServicerContext) -> None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or wrong token: send metadata 'authorization: Bearer <token>' with "
                "the token of the listener you connect to (ALE_TOKEN for agents)",
            )

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method or ""
        if method.startswith(_UNAUTHENTICATED_OK):
            return continuation(handler_call_details)
        given = b""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
        if not hmac.compare_digest(given, self._expected):
            return self._deny
        return continuation(handler_call_details)


def _rpc(fn: Callable[[Any, Req, grpc.ServicerContext], Resp]) -> Callable[..., Resp]:
    @functools.wraps(fn)
    def wrapper(self: Any, request: Req, context: grpc.ServicerContext) -> Resp:
        try:
            return fn(self, request, context)
        except AleError as exc:
            context.abort(exc.code, exc.message)
            raise  # unreachable: abort raises
        except Exception:
            log.exception("bug in %s", fn.__name__)
            context.abort(grpc.StatusCode.INTERNAL, "internal evaluator error (logged)")
            raise

    return wrapper


_JOB_STATE = {s: getattr(pb, f"JOB_STATE_{s.value}") for s in JobState}
_FAILURE = {
    FailureSource.NONE: pb.FAILURE_SOURCE_UNSPECIFIED,
    FailureSource.SUBMISSION: pb.FAILURE_SOURCE_SUBMISSION,
    FailureSource.INFRASTRUCTURE: pb.FAILURE_SOURCE_INFRASTRUCTURE,
}


def _box_spec(name: str, space: Any) -> pb.TensorSpec:
    spec = pb.TensorSpec(name=name, dtype=proto_dtype(space.dtype), shape=list(space.shape))
    if hasattr(space, "low"):
        spec.low.CopyFrom(to_tensor(np.asarray(space.low)))
        spec.high.CopyFrom(to_tensor(np.asarray(space.high)))
    return spec


class _Servicer(pb_grpc.AleEnvServicer):  # type: ignore[misc]
    def __init__(self, evaluator: Evaluator, role: Role, max_message_bytes: int) -> None:
        self._ev = evaluator
        self._role = role
        self._max_message_bytes = max_message_bytes
        self._spaces: dict[str, tuple[pb.TensorSpec, pb.TensorSpec]] = {}

    def _spaces_for(self, task: TaskSpec) -> tuple[pb.TensorSpec, pb.TensorSpec]:
        if task.id not in self._spaces:
            import gymnasium as gym

            env = gym.make(task.env.gym_id, disable_env_checker=True, **task.env.kwargs)
            try:
                self._spaces[task.id] = (
                    _box_spec("observation", env.observation_space),
                    _box_spec("action", env.action_space),
                )
            finally:
                env.close()
        return self._spaces[task.id]

    @_rpc
    def GetSpec(
        self, request: pb.GetSpecRequest, context: grpc.ServicerContext
    ) -> pb.GetSpecResponse:
        task = self._ev.task(request.task_id)
        obs_spec, act_spec = self._spaces_for(task)
        entry = self._ev.registry.manifest_entry(task.id)
        limits = pb.Limits(max_message_bytes=self._max_message_bytes)
        if entry is not None:
            limits.wall_clock_budget_s = entry.compute_budget.wall_clock_s
            limits.max_submissions_per_run = entry.compute_budget.max_submissions
        return pb.GetSpecResponse(
            protocol_version=PROTOCOL_VERSION,
            task_id=task.id,
            mode=task.mode.value,
            task_config_json=task.model_dump_json(),
            submission_contract_json=task.contract.model_dump_json() if task.contract else "",
            observation_spec=obs_spec,
            action_spec=act_spec,
            capabilities=["batch"],
            limits=limits,
        )

    @_rpc
    def OpenSession(self, request: Any, context: grpc.ServicerContext) -> Any:
        raise UnimplementedError("interactive sessions are not offered by this evaluator yet")

    Reset = OpenSession
    Step = OpenSession
    CloseSession = OpenSession

    @_rpc
    def SubmitBatchEval(
        self, request: pb.SubmitBatchEvalRequest, context: grpc.ServicerContext
    ) -> pb.SubmitBatchEvalResponse:
        if self._role is not Role.AGENT:
            raise PermissionDeniedError("SubmitBatchEval is an agent-channel call")
        job, dedup = self._ev.submit(
            request.task_id, request.run_id, request.submission_path, request.client_token
        )
        return pb.SubmitBatchEvalResponse(job_id=job.job_id, deduplicated=dedup)

    def _status(self, job: JobRecord) -> pb.GetBatchEvalStatusResponse:
        return pb.GetBatchEvalStatusResponse(
            job_id=job.job_id,
            task_id=job.task_id,
            state=_JOB_STATE[job.state],
            progress=pb.Progress(
                episodes_done=job.episodes_done, episodes_total=job.episodes_total
            ),
            queue_position=self._ev.store.queue_position(job.job_id),
            failure_source=_FAILURE[job.failure_source],
            failure_reason=job.failure_reason,
            heartbeat_unix=job.heartbeat,
            created_unix=job.created,
            updated_unix=job.updated,
        )

    @_rpc
    def GetBatchEvalStatus(
        self, request: pb.GetBatchEvalStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetBatchEvalStatusResponse:
        return self._status(self._ev.job(request.job_id, request.run_id))

    @_rpc
    def GetEvalResult(
        self, request: pb.GetEvalResultRequest, context: grpc.ServicerContext
    ) -> pb.GetEvalResultResponse:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError(
                "GetEvalResult answers only on the harness channel; agents may poll "
                "GetBatchEvalStatus, which never carries the metric"
            )
        result = self._ev.result(request.job_id, request.run_id)
        result = result.model_copy(update={"official": True})
        return pb.GetEvalResultResponse(eval_result_json=result.model_dump_json(), official=True)


def make_servicer(evaluator: Evaluator, role: Role, max_message_bytes: int) -> _Servicer:
    return _Servicer(evaluator, role, max_message_bytes)
