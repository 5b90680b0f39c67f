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
import threading
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import numpy as np

from ale_robotics import PROTOCOL_VERSION
from ale_robotics.errors import (
    AleError,
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator.core import Evaluator
from ale_robotics.evaluator.sessions import settings_for
from ale_robotics.evaluator.store import FailureSource, JobRecord, JobState
from ale_robotics.evaluator.vector_session import AUTORESET_MODE, Batch, Session, SessionKind
from ale_robotics.infos import encode_infos
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.tensors import from_tensor, numpy_dtype, proto_dtype, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

__all__ = ["AuthInterceptor", "Role", "make_servicer", "step_response"]

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


def _answer(fn: Callable[[], Resp], context: grpc.ServicerContext, name: str) -> Resp:
    """Run one request's work; an AleError becomes its status, anything else INTERNAL."""
    try:
        return fn()
    except AleError as exc:
        context.abort(exc.code, exc.message)
        raise  # unreachable: abort raises
    except Exception:
        log.exception("bug in %s", name)
        context.abort(grpc.StatusCode.INTERNAL, "internal evaluator error (logged)")
        raise


def _rpc(fn: Callable[[Any, Req, grpc.ServicerContext], Resp]) -> Callable[..., Resp]:
    @functools.wraps(fn)
    def wrapper(self: Any, request: Req, context: grpc.ServicerContext) -> Resp:
        return _answer(lambda: fn(self, request, context), context, fn.__name__)

    return wrapper


_JOB_STATE = {s: getattr(pb, f"JOB_STATE_{s.value}") for s in JobState}
_FAILURE = {
    FailureSource.NONE: pb.FAILURE_SOURCE_UNSPECIFIED,
    FailureSource.SUBMISSION: pb.FAILURE_SOURCE_SUBMISSION,
    FailureSource.INFRASTRUCTURE: pb.FAILURE_SOURCE_INFRASTRUCTURE,
}


def step_response(batch: Batch) -> pb.StepResponse:
    """The wire form of one session Step (``benchmarks/step_breakdown.py`` times it too)."""
    assert batch.rewards is not None
    assert batch.terminated is not None and batch.truncated is not None
    columns, rest = encode_infos(batch.infos)
    return pb.StepResponse(
        observation=to_tensor(batch.obs),
        reward=to_tensor(batch.rewards),
        terminated=to_tensor(batch.terminated),
        truncated=to_tensor(batch.truncated),
        info_json=rest,
        info_columns=columns,
        episodes_completed=batch.episodes_completed,
        eval_complete=batch.eval_complete,
    )


_KINDS = {pb.SESSION_KIND_PRACTICE: SessionKind.PRACTICE, pb.SESSION_KIND_EVAL: SessionKind.EVAL}


def _capabilities(task: TaskSpec) -> list[str]:
    if task.mode is not TaskMode.INTERACTIVE:
        return [task.mode.value]
    caps = ["interactive", "eval_sessions", f"autoreset:{AUTORESET_MODE}", "step_stream"]
    if settings_for(task).practice_allowed:
        caps.insert(1, "practice_sessions")
    return caps


def _box_spec(name: str, space: Any) -> pb.TensorSpec:
    spec = pb.TensorSpec(name=name, dtype=proto_dtype(space.dtype), shape=list(space.shape))
    if hasattr(space, "low"):
        spec.low.CopyFrom(to_tensor(np.asarray(space.low)))
        spec.high.CopyFrom(to_tensor(np.asarray(space.high)))
    return spec


class _Servicer(pb_grpc.AleEnvServicer):  # type: ignore[misc]
    def __init__(
        self, evaluator: Evaluator, role: Role, max_message_bytes: int, max_step_streams: int
    ) -> None:
        self._ev = evaluator
        self._role = role
        self._max_message_bytes = max_message_bytes
        self._max_step_streams = max_step_streams
        # An open stream holds one server thread for its whole life: bounded here, and
        # the listener's pool is sized so that unary calls always find a thread.
        self._stream_slots = threading.BoundedSemaphore(max_step_streams)
        self._spaces: dict[str, tuple[pb.TensorSpec, pb.TensorSpec]] = {}

    def _spaces_for(self, task: TaskSpec) -> tuple[pb.TensorSpec, pb.TensorSpec]:
        if task.id not in self._spaces:
            import gymnasium as gym

            env = gym.make(task.env.gym_id, disable_env_checker=True, **task.env.kwargs)
            try:
                obs_space = env.observation_space
                if isinstance(obs_space, gym.spaces.Dict):  # goal envs (Fetch): flat Box view
                    obs_space = gym.spaces.flatten_space(obs_space)
                self._spaces[task.id] = (
                    _box_spec("observation", obs_space),
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
        limits = pb.Limits(
            max_message_bytes=self._max_message_bytes,
            max_episode_steps=task.env.max_episode_steps,
        )
        if entry is not None:
            limits.wall_clock_budget_s = entry.compute_budget.wall_clock_s
            limits.max_submissions_per_run = entry.compute_budget.max_submissions
        if task.mode is TaskMode.INTERACTIVE:
            session = settings_for(task)
            limits.max_sessions = session.max_sessions
            limits.max_envs_per_session = session.max_envs_per_session
            limits.session_idle_timeout_s = session.idle_timeout_s
            limits.call_deadline_s = session.call_deadline_s
            limits.eval_episodes = task.eval.episodes
            limits.max_step_streams = self._max_step_streams
        return pb.GetSpecResponse(
            protocol_version=PROTOCOL_VERSION,
            task_id=task.id,
            mode=task.mode.value,
            task_config_json=task.model_dump_json(),
            submission_contract_json=task.contract.model_dump_json() if task.contract else "",
            observation_spec=obs_spec,
            action_spec=act_spec,
            capabilities=_capabilities(task),
            limits=limits,
        )

    # ------------------------------------------------- interactive sessions --

    def _check_message_size(self, task: TaskSpec, num_envs: int) -> None:
        """Refuse a session whose Step responses could not fit in one message."""
        obs_spec, _ = self._spaces_for(task)
        per_env = int(np.prod(obs_spec.shape)) * numpy_dtype(obs_spec.dtype).itemsize
        # observation + reward, flags and a generous allowance for one info per env
        need = num_envs * (per_env + 8 + 2 + 4096)
        if need > self._max_message_bytes:
            raise ResourceExhaustedError(
                f"{num_envs} envs need up to {need} bytes per Step response, over the limit "
                f"max_message_bytes = {self._max_message_bytes}: open fewer envs"
            )

    @_rpc
    def OpenSession(
        self, request: pb.OpenSessionRequest, context: grpc.ServicerContext
    ) -> pb.OpenSessionResponse:
        task = self._ev.task(request.task_id)
        kind = _KINDS.get(request.kind)
        if kind is None:
            raise InvalidArgumentError(
                "kind must be SESSION_KIND_PRACTICE (your seeds, for training) or "
                "SESSION_KIND_EVAL (hidden seeds, the official metric)"
            )
        num_envs = request.num_envs or 1  # proto3 default 0 means "unset"
        # Eval sessions are run-bound; practice ones too when the run is known, so that
        # the harness can close everything of a run once the agent has exited.
        bound = kind is SessionKind.EVAL or request.run_id or self._ev.config.run_id
        run_id = self._ev.check_run(request.run_id) if bound else ""
        if 0 < num_envs <= settings_for(task).max_envs_per_session:
            self._check_message_size(task, num_envs)
        session = self._ev.sessions.open(task, kind, num_envs, run_id)
        return pb.OpenSessionResponse(
            session_id=session.id,
            num_envs=session.num_envs,
            episode_budget=session.budget,
            seeds_ignored=kind is SessionKind.EVAL,
            autoreset_mode=AUTORESET_MODE,
            max_episode_steps=task.env.max_episode_steps,
        )

    @_rpc
    def Reset(self, request: pb.ResetRequest, context: grpc.ServicerContext) -> pb.ResetResponse:
        seeds = list(request.seeds)

        def reset(session: Session) -> pb.ResetResponse:
            batch = session.reset(seeds)
            columns, rest = encode_infos(batch.infos)
            return pb.ResetResponse(
                observation=to_tensor(batch.obs),
                seeds_ignored=batch.seeds_ignored,
                info_json=rest,
                info_columns=columns,
                episodes_completed=batch.episodes_completed,
            )

        return self._ev.sessions.call(request.session_id, context.time_remaining(), reset)

    @_rpc
    def Step(self, request: pb.StepRequest, context: grpc.ServicerContext) -> pb.StepResponse:
        return self._step(request, context)

    def StepStream(
        self, requests: Iterator[pb.StepRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.StepResponse]:
        """Step for each request of the stream, in order; the first error ends the stream."""
        if not self._stream_slots.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"all {self._max_step_streams} step streams of this listener are open "
                "(limit max_step_streams): call Step instead, or close a stream",
            )
        try:
            for request in requests:
                yield _answer(functools.partial(self._step, request, context), context, "Step")
        except grpc.RpcError:
            return  # the client cancelled or went away: the stream is over, nothing to answer
        finally:
            self._stream_slots.release()

    def _step(self, request: pb.StepRequest, context: grpc.ServicerContext) -> pb.StepResponse:
        def step(session: Session) -> pb.StepResponse:
            return step_response(session.step(from_tensor(request.action, "action")))

        return self._ev.sessions.call(request.session_id, context.time_remaining(), step)

    @_rpc
    def CloseSession(
        self, request: pb.CloseSessionRequest, context: grpc.ServicerContext
    ) -> pb.CloseSessionResponse:
        if request.session_id:
            done = self._ev.sessions.close(request.session_id)
            return pb.CloseSessionResponse(episodes_completed=done, sessions_closed=1)
        if not request.run_id:
            raise InvalidArgumentError("name the session_id to close")
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError(
                "closing every session of a run is a harness-channel call; close your own "
                "sessions by session_id"
            )
        run = self._ev.check_run(request.run_id)
        n = self._ev.sessions.close_run(run, "the agent exited")
        return pb.CloseSessionResponse(sessions_closed=n)

    @_rpc
    def SubmitBatchEval(
        self, request: pb.SubmitBatchEvalRequest, context: grpc.ServicerContext
    ) -> pb.SubmitBatchEvalResponse:
        if self._ev.task(request.task_id).mode is TaskMode.TASK_CONFIG:
            # read-from-task-config tasks: the harness submits the agent's copy when it exits
            if self._role is not Role.HARNESS:
                raise PermissionDeniedError(
                    "this task evaluates your copy of its config when you exit (see the "
                    "contract's notes): edit the file in the submission directory, then exit; "
                    "do not call SubmitBatchEval"
                )
        elif self._role is not Role.AGENT:
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


def make_servicer(
    evaluator: Evaluator, role: Role, max_message_bytes: int, max_step_streams: int
) -> _Servicer:
    return _Servicer(evaluator, role, max_message_bytes, max_step_streams)
