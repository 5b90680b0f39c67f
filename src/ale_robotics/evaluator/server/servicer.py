"""The ``AleEnv`` gRPC servicer: a thin translation between protobuf and the evaluator's services.

The servicer holds the services it translates to (:class:`Backends`: jobs,
sessions, runs, task lookups), never the :class:`~.core.Evaluator` that built
them.

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
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import numpy as np

from ale_robotics import PROTOCOL_VERSION
from ale_robotics.envs.make import make_env
from ale_robotics.errors import (
    AleError,
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from ale_robotics.evaluator.batch.jobs import JobService
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.config import EvaluatorConfig
from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.checkpoints import CheckpointService
from ale_robotics.evaluator.runs.registry import (
    NO_RUN_MESSAGE,
    PRACTICE_MESSAGE,
    TRUSTED,
    Access,
    Scope,
    check_task,
)
from ale_robotics.evaluator.runs.service import RunService
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.sessions.manager import SessionManager, Watch, settings_for
from ale_robotics.evaluator.sessions.vector import (
    AUTORESET_MODE,
    AUTORESET_MODES,
    Batch,
    Session,
    SessionKind,
)
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.infos import encode_infos
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.tasks.brief import render_brief
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.tensors import from_tensor, numpy_dtype, proto_dtype, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

__all__ = [
    "AuthInterceptor",
    "Backends",
    "Role",
    "listener_scope",
    "make_servicer",
    "step_response",
]

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")

if TYPE_CHECKING:  # grpc-stubs make it generic; the runtime class is not subscriptable
    _InterceptorBase = grpc.ServerInterceptor[Any, Any]
else:
    _InterceptorBase = grpc.ServerInterceptor

_UNAUTHENTICATED_OK = ("/grpc.health.v1.Health/", "/grpc.reflection.")
_PRACTICE = Scope(Access.PRACTICE)


class Role(StrEnum):
    AGENT = "agent"
    HARNESS = "harness"


@dataclass(frozen=True)
class Backends:
    """The evaluator's services a servicer translates requests to."""

    tasks: TaskCatalog
    access: RunAccess
    jobs: JobService
    sessions: SessionManager
    runs: RunService
    training: TrainingLedger
    checkpoints: CheckpointService


def listener_scope(config: EvaluatorConfig, role: Role) -> Scope:
    """What the listener's own token (the state dir's ``<role>.token``) may touch."""
    if role is Role.HARNESS:
        return TRUSTED
    if config.run_id is not None:
        return Scope(Access.RUN, config.run_id)
    return Scope(Access.NO_RUN) if config.per_run_tokens else Scope(Access.ANY_RUN)


class AuthInterceptor(_InterceptorBase):
    """Refuses any AleEnv call without ``authorization: Bearer <token>`` this listener accepts.

    That is the listener's own token, or on the agent listener of a shared evaluator
    an open run's token (``run_tokens``, looked up by its SHA-256) or the operator's
    practice token (``practice_token``, :attr:`.runs.registry.Access.PRACTICE`). :meth:`scope`
    says what a call's token may touch; the servicer asks it again for every call, so a
    token revoked by CloseRun stops working at once (``closed``: whether the run a
    listener token is bound to was closed, on an evaluator bound to one run).
    """

    def __init__(
        self,
        token: str,
        *,
        scope: Scope = TRUSTED,
        run_tokens: Callable[[bytes], Scope | None] | None = None,
        practice_token: str | None = None,
        closed: Callable[[str], bool] | None = None,
    ) -> None:
        self._expected = f"Bearer {token}".encode()
        self._scope = scope
        self._run_tokens = run_tokens
        self._practice = f"Bearer {practice_token}".encode() if practice_token else None
        self._closed = closed

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
        if self.scope(handler_call_details.invocation_metadata) is None:
            return self._deny
        return continuation(handler_call_details)

    def scope(self, metadata: Any) -> Scope | None:
        """The scope of a call's ``authorization`` metadata; None when no token matches."""
        given = b""
        for key, value in metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
        if hmac.compare_digest(given, self._expected):
            if self._scope.bound and self._closed is not None and self._closed(self._scope.run_id):
                return None  # the bound run was closed: its token died with it
            return self._scope
        if self._practice is not None and hmac.compare_digest(given, self._practice):
            return _PRACTICE
        if self._run_tokens is not None and given.startswith(b"Bearer "):
            return self._run_tokens(given[len(b"Bearer ") :])
        return None


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


def _capabilities(task: TaskSpec, shared: bool) -> list[str]:
    """What a client may rely on, so that it can fall back (or refuse) on older evaluators.

    ``open_run``: OpenRun/CloseRun are served (a shared evaluator); ``coarse_progress``:
    agent-channel job status carries no per-episode progress (see ``Progress``);
    ``autoreset:MODE`` per Gymnasium autoreset mode served (the first, ``next_step``, is
    the default); ``watch_sessions``: WatchSessions frees a dead client's sessions;
    ``float64_actions``: OpenSession may ask for float64 actions passed unrounded;
    ``render``: the task offers render modes (OpenSessionResponse.render_modes).
    ``practice_sessions`` / ``eval_sessions``: OpenSession opens sessions of that kind for
    the task; a batch task whose simulator runs only in the evaluator (training.simulator
    "evaluator") offers practice sessions, its agent's only way to train, and never eval
    sessions (its mode stays "batch"). ``checkpoints``: SubmitCheckpoint is offered for the
    task (training.checkpoints).
    """
    runs = ["open_run", "coarse_progress"] if shared else ["coarse_progress"]
    ckpt = ["checkpoints"] if task.training is not None and task.training.checkpoints else []
    if not task.offers_eval_sessions and not task.offers_practice_sessions:
        return [task.mode.value, *ckpt, *runs]
    autoreset = [f"autoreset:{AUTORESET_MODE}"]
    autoreset += [f"autoreset:{m}" for m in AUTORESET_MODES if m != AUTORESET_MODE]
    caps = ["interactive" if task.mode is TaskMode.INTERACTIVE else task.mode.value]
    if task.offers_practice_sessions:
        caps.append("practice_sessions")
    if task.offers_eval_sessions:
        caps.append("eval_sessions")
    caps += [*autoreset, "step_stream", "watch_sessions", "float64_actions"]
    if rendering.offered_modes(task):
        caps.append("render")
    return [*caps, *ckpt, *runs]


def _box_spec(name: str, space: Any) -> pb.TensorSpec:
    spec = pb.TensorSpec(name=name, dtype=proto_dtype(space.dtype), shape=list(space.shape))
    if hasattr(space, "low"):
        spec.low.CopyFrom(to_tensor(np.asarray(space.low)))
        spec.high.CopyFrom(to_tensor(np.asarray(space.high)))
    return spec


class _Servicer(pb_grpc.AleEnvServicer):  # type: ignore[misc]
    def __init__(
        self,
        backends: Backends,
        role: Role,
        max_message_bytes: int,
        max_step_streams: int,
        auth: AuthInterceptor,
    ) -> None:
        self._tasks = backends.tasks
        self._access = backends.access
        self._jobs = backends.jobs
        self._sessions = backends.sessions
        self._runs = backends.runs
        self._training = backends.training
        self._checkpoints = backends.checkpoints
        self._role = role
        self._auth = auth
        self._max_message_bytes = max_message_bytes
        self._max_step_streams = max_step_streams
        # An open stream holds one server thread for its whole life: bounded here, and
        # the listener's pool is sized so that unary calls always find a thread.
        self._stream_slots = threading.BoundedSemaphore(max_step_streams)
        # A WatchSessions stream holds a stream slot too, and watches hold at most half
        # of them, so that a listener full of watching agents still has streams to step.
        self._watch_slots = threading.BoundedSemaphore(max(1, max_step_streams // 2))
        self._max_watches = max_step_streams // 2
        self._spaces: dict[str, tuple[pb.TensorSpec, pb.TensorSpec]] = {}
        self._briefs: dict[str, str] = {}

    def _scope(self, context: grpc.ServicerContext) -> Scope:
        """Who this call acts for, from its token (never from the request)."""
        scope = self._auth.scope(context.invocation_metadata())
        if scope is None:  # revoked by CloseRun since the interceptor let it in
            raise UnauthenticatedError("missing or wrong token (a closed run's token is revoked)")
        return scope

    def _spaces_for(self, task: TaskSpec) -> tuple[pb.TensorSpec, pb.TensorSpec]:
        if task.id not in self._spaces:
            import gymnasium as gym

            env = make_env(task.env, time_limit=False)
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
        scope = self._scope(context)
        # a run's token asks for its run's task by default; other tasks' specs are public
        task = self._tasks.task(request.task_id or (scope.task_id if scope.bound else ""))
        obs_spec, act_spec = self._spaces_for(task)
        entry = self._tasks.manifest_entry(task.id)
        limits = pb.Limits(
            max_message_bytes=self._max_message_bytes,
            max_episode_steps=task.env.max_episode_steps,
        )
        if entry is not None:
            limits.wall_clock_budget_s = entry.compute_budget.wall_clock_s
            limits.max_submissions_per_run = entry.compute_budget.max_submissions
        budget = self._tasks.training_budget(task)
        if budget is not None:
            limits.training_steps = budget.steps
            limits.training_steps_unit = budget.unit.value
            limits.training_agent_steps = budget.agent_steps
            limits.training_steps_enforced = budget.enforced
            limits.training_budget = budget.describe()
        run = scope.run_id if scope.bound else (self._access.bound_run or "")
        if run and task.evaluator_counts_training:
            limits.training_agent_steps_used = self._training.used(run)
        if task.offers_eval_sessions or task.offers_practice_sessions:
            session = settings_for(task)
            limits.max_sessions = session.max_sessions
            limits.max_envs_per_session = session.max_envs_per_session
            limits.session_idle_timeout_s = session.idle_timeout_s
            limits.call_deadline_s = session.call_deadline_s
            if task.offers_eval_sessions:  # a batch task's episodes are its submission's
                limits.eval_episodes = task.eval.episodes
            limits.max_step_streams = self._max_step_streams
            limits.max_sessions, limits.max_sessions_total = self._sessions.caps(task)
        return pb.GetSpecResponse(
            protocol_version=PROTOCOL_VERSION,
            task_id=task.id,
            mode=task.mode.value,
            task_config_json=task.model_dump_json(),
            submission_contract_json=task.contract.model_dump_json() if task.contract else "",
            observation_spec=obs_spec,
            action_spec=act_spec,
            capabilities=_capabilities(task, shared=self._access.bound_run is None),
            limits=limits,
            brief=self._brief_for(task, entry),
        )

    def _brief_for(self, task: TaskSpec, entry: ManifestEntry | None) -> str:
        """The task brief as this evaluator serves the task (rendered once per task)."""
        if task.id not in self._briefs:
            self._briefs[task.id] = render_brief(task, entry)
        return self._briefs[task.id]

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
        scope = self._scope(context)
        task = self._tasks.task(check_task(scope, request.task_id))
        kind = _KINDS.get(request.kind)
        if kind is None:
            raise InvalidArgumentError(
                "kind must be SESSION_KIND_PRACTICE (your seeds, for training) or "
                "SESSION_KIND_EVAL (hidden seeds, the official metric)"
            )
        num_envs = request.num_envs or 1  # proto3 default 0 means "unset"
        # Eval sessions are run-bound; practice ones too when the run is known (always
        # for a run's token), so that the harness can close everything of a run once the
        # agent has exited, and so that they count against that run's session limit.
        if scope.access is Access.NO_RUN:
            raise PermissionDeniedError(NO_RUN_MESSAGE)
        if scope.access is Access.PRACTICE:
            # the operator's own practice (--allow-practice-without-run): never a run's
            if kind is SessionKind.EVAL or request.run_id:
                raise PermissionDeniedError(PRACTICE_MESSAGE)
            run_id = ""
        else:
            bound = (
                scope.bound or kind is SessionKind.EVAL or request.run_id or self._access.bound_run
            )
            run_id = self._access.check_run(request.run_id, scope) if bound else ""
        if 0 < num_envs <= settings_for(task).max_envs_per_session:
            self._check_message_size(task, num_envs)
        render_mode = request.render_mode or None
        session = self._sessions.open(
            task,
            kind,
            num_envs,
            run_id,
            render_mode,
            request.float64_actions,
            request.autoreset_mode or AUTORESET_MODE,
        )
        return pb.OpenSessionResponse(
            session_id=session.id,
            num_envs=session.num_envs,
            episode_budget=session.budget,
            seeds_ignored=kind is SessionKind.EVAL,
            autoreset_mode=session.autoreset_mode,
            max_episode_steps=task.env.max_episode_steps,
            render_modes=rendering.offered_modes(task),
            render_fps=session.render_fps,
            float64_actions=session.float64_actions,
        )

    @_rpc
    def Render(self, request: pb.RenderRequest, context: grpc.ServicerContext) -> pb.RenderResponse:
        scope = self._scope(context)

        def render(session: Session) -> pb.RenderResponse:
            frames = session.render()
            if frames.nbytes + 1024 > self._max_message_bytes:
                raise ResourceExhaustedError(
                    f"the frames of {session.num_envs} envs take {frames.nbytes} bytes, over "
                    f"max_message_bytes = {self._max_message_bytes}: render fewer envs per session"
                )
            return pb.RenderResponse(frames=to_tensor(frames))

        return self._sessions.call(request.session_id, context.time_remaining(), render, scope)

    @_rpc
    def Reset(self, request: pb.ResetRequest, context: grpc.ServicerContext) -> pb.ResetResponse:
        scope = self._scope(context)
        seeds = list(request.seeds)
        mask = list(request.reset_mask)

        def reset(session: Session) -> pb.ResetResponse:
            batch = session.reset(seeds, mask)
            columns, rest = encode_infos(batch.infos)
            return pb.ResetResponse(
                observation=to_tensor(batch.obs),
                seeds_ignored=batch.seeds_ignored,
                info_json=rest,
                info_columns=columns,
                episodes_completed=batch.episodes_completed,
            )

        return self._sessions.call(request.session_id, context.time_remaining(), reset, scope)

    @_rpc
    def Step(self, request: pb.StepRequest, context: grpc.ServicerContext) -> pb.StepResponse:
        return self._step(request, context, self._scope(context))

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
            scope = _answer(functools.partial(self._scope, context), context, "StepStream")
            for request in requests:
                step = functools.partial(self._step, request, context, scope)
                yield _answer(step, context, "Step")
        except grpc.RpcError:
            return  # the client cancelled or went away: the stream is over, nothing to answer
        finally:
            self._stream_slots.release()

    def WatchSessions(
        self, requests: Iterator[pb.WatchSessionsRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.WatchSessionsResponse]:
        """Watch the caller's sessions while the stream lives (:meth:`SessionManager.unwatch`).

        However the stream ends (a cancel, a lost connection, a dead process, or a
        half-close: gRPC cannot reliably tell them apart on the server), the sessions
        it still names are orphaned; a client never ends its watch while it holds one.
        """
        if self._max_watches == 0 or not self._watch_slots.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"all {self._max_watches} watch streams of this listener are open (half of "
                "max_step_streams): these sessions are reaped only when idle",
            )
        if not self._stream_slots.acquire(blocking=False):
            self._watch_slots.release()
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"all {self._max_step_streams} streams of this listener are open (limit "
                "max_step_streams): these sessions are reaped only when idle",
            )
        sessions = self._sessions
        watch = Watch()
        try:
            scope = _answer(functools.partial(self._scope, context), context, "WatchSessions")
            for request in requests:
                missing = sessions.attach(watch, request.session_ids, scope)
                yield pb.WatchSessionsResponse(not_found=missing, grace_s=sessions.orphan_grace_s)
        except grpc.RpcError:
            return  # the client went away
        finally:
            sessions.unwatch(watch)
            self._stream_slots.release()
            self._watch_slots.release()

    def _step(
        self, request: pb.StepRequest, context: grpc.ServicerContext, scope: Scope
    ) -> pb.StepResponse:
        def step(session: Session) -> pb.StepResponse:
            return step_response(session.step(from_tensor(request.action, "action")))

        return self._sessions.call(request.session_id, context.time_remaining(), step, scope)

    @_rpc
    def CloseSession(
        self, request: pb.CloseSessionRequest, context: grpc.ServicerContext
    ) -> pb.CloseSessionResponse:
        if request.session_id:
            done = self._sessions.close(request.session_id, self._scope(context))
            return pb.CloseSessionResponse(episodes_completed=done, sessions_closed=1)
        if not request.run_id:
            raise InvalidArgumentError("name the session_id to close")
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError(
                "closing every session of a run is a harness-channel call; close your own "
                "sessions by session_id"
            )
        run = self._access.check_run(request.run_id)
        n = self._sessions.close_run(run, "the agent exited")
        return pb.CloseSessionResponse(sessions_closed=n)

    @_rpc
    def SubmitBatchEval(
        self, request: pb.SubmitBatchEvalRequest, context: grpc.ServicerContext
    ) -> pb.SubmitBatchEvalResponse:
        scope = self._scope(context)
        task_id = check_task(scope, request.task_id)
        if self._tasks.task(task_id).mode is TaskMode.TASK_CONFIG:
            # read-from-task-config tasks: the harness submits the agent's copy when it exits
            if self._role is not Role.HARNESS:
                raise PermissionDeniedError(
                    "this task evaluates your copy of its config when you exit (see the "
                    "contract's notes): edit the file in the submission directory, then exit; "
                    "do not call SubmitBatchEval"
                )
        elif self._role is not Role.AGENT:
            raise PermissionDeniedError("SubmitBatchEval is an agent-channel call")
        job, dedup = self._jobs.submit(
            task_id, request.run_id, request.submission_path, request.client_token, scope
        )
        return pb.SubmitBatchEvalResponse(job_id=job.job_id, deduplicated=dedup)

    @_rpc
    def SubmitCheckpoint(
        self, request: pb.SubmitCheckpointRequest, context: grpc.ServicerContext
    ) -> pb.SubmitCheckpointResponse:
        """Commit a checkpoint of the run's training (:class:`.runs.checkpoints.CheckpointService`);
        answered once it is snapshotted and signed as received; it is evaluated when the
        run's result is built, so the answer is the same whatever the evaluation finds (no
        return, no failure, no timing that follows the rollout)."""
        scope = self._scope(context)
        if self._role is not Role.AGENT:
            raise PermissionDeniedError("SubmitCheckpoint is an agent-channel call")
        receipt = self._checkpoints.submit(
            check_task(scope, request.task_id),
            request.run_id,
            request.submission_path,
            request.client_token,
            scope,
        )
        return pb.SubmitCheckpointResponse(
            checkpoint_id=receipt.checkpoint_id,
            index=receipt.index,
            practice_steps=receipt.practice_steps,
            deduplicated=receipt.deduplicated,
            checkpoints_left=receipt.checkpoints_left,
        )

    def _status(self, job: JobRecord) -> pb.GetBatchEvalStatusResponse:
        """The job's status; coarse on the agent channel.

        The moment each hidden episode ends tells how long it lasted, and for many
        tasks an episode's length is its return (an inverted pendulum earns 1 per
        step until it falls). So the agent channel gets no per-episode progress:
        episodes_done is 0 until the job SUCCEEDED, no heartbeat (every progress
        update is one), and updated_unix only for state changes (0 while RUNNING,
        when the row changes with each episode). The harness channel keeps it all.
        """
        done, heartbeat, updated = job.episodes_done, job.heartbeat, job.updated
        coarse = self._role is Role.AGENT
        if coarse:
            done = job.episodes_total if job.state is JobState.SUCCEEDED else 0
            heartbeat = 0.0
            updated = 0.0 if job.state is JobState.RUNNING else job.updated
        return pb.GetBatchEvalStatusResponse(
            job_id=job.job_id,
            task_id=job.task_id,
            state=_JOB_STATE[job.state],
            progress=pb.Progress(
                episodes_done=done, episodes_total=job.episodes_total, coarse=coarse
            ),
            # an embedded evaluator runs only its run's jobs: other runs' are not ahead
            queue_position=self._jobs.queue_position(job),
            failure_source=_FAILURE[job.failure_source],
            failure_reason=job.failure_reason,
            heartbeat_unix=heartbeat,
            created_unix=job.created,
            updated_unix=updated,
        )

    @_rpc
    def GetBatchEvalStatus(
        self, request: pb.GetBatchEvalStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetBatchEvalStatusResponse:
        job = self._jobs.job(request.job_id, request.run_id, self._scope(context))
        return self._status(job)

    @_rpc
    def GetEvalResult(
        self, request: pb.GetEvalResultRequest, context: grpc.ServicerContext
    ) -> pb.GetEvalResultResponse:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError(
                "GetEvalResult answers only on the harness channel; agents may poll "
                "GetBatchEvalStatus, which never carries the metric"
            )
        result = self._jobs.result(request.job_id, request.run_id)
        # official: the task's full protocol read here; a smoke run (--episodes N) never is
        official = result.smoke_run is None
        result = result.model_copy(update={"read_on_harness_channel": True, "official": official})
        return pb.GetEvalResultResponse(
            eval_result_json=result.model_dump_json(), official=official
        )

    # ----------------------------------------------------------------- runs --

    @_rpc
    def OpenRun(
        self, request: pb.OpenRunRequest, context: grpc.ServicerContext
    ) -> pb.OpenRunResponse:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError("OpenRun is a harness-channel call")
        run = self._runs.open_run(request.run_id, request.task_id)
        sub = run.submission_dir
        return pb.OpenRunResponse(
            run_id=run.run_id,
            task_id=run.task_id,
            agent_token=run.agent_token,
            submission_dir=str(sub) if sub is not None else "",
            submission_subdir=sub.name if sub is not None else "",
        )

    @_rpc
    def CloseRun(
        self, request: pb.CloseRunRequest, context: grpc.ServicerContext
    ) -> pb.CloseRunResponse:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError("CloseRun is a harness-channel call")
        closed = self._runs.close_run(request.run_id)
        return pb.CloseRunResponse(
            sessions_closed=closed.sessions_closed, jobs_cancelled=closed.jobs_cancelled
        )


def make_servicer(
    backends: Backends,
    role: Role,
    max_message_bytes: int,
    max_step_streams: int,
    auth: AuthInterceptor,
) -> _Servicer:
    """The servicer of one listener: ``role`` fixed, translating to ``backends``."""
    return _Servicer(backends, role, max_message_bytes, max_step_streams, auth)
