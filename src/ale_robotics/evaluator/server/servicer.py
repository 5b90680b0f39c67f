"""The ``AleEnv`` gRPC servicer: a thin translation between protobuf and the evaluator's services.

The servicer holds the services it translates to (:class:`Backends`: jobs,
sessions, runs, task lookups), never the :class:`~.core.Evaluator` that built
them.

One servicer instance per listener, constructed with that listener's role; the
role is never read from a request. Every call runs through :func:`.status.rpc`, the one
place where an :class:`~ale_robotics.errors.AleError` becomes its status code; the token
rules are :mod:`.auth`'s, the wire forms of records :mod:`.messages`', and GetEvalVideos,
the one call that streams files, :mod:`.videos`'.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import numpy as np

from ale_robotics import PROTOCOL_VERSION
from ale_robotics.errors import (
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from ale_robotics.evaluator.batch.jobs import JobService
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.checkpoints import CheckpointService
from ale_robotics.evaluator.runs.registry import (
    NO_RUN_MESSAGE,
    PRACTICE_MESSAGE,
    Access,
    Scope,
    check_task,
)
from ale_robotics.evaluator.runs.service import RunService
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.server.auth import AuthInterceptor, Role
from ale_robotics.evaluator.server.dataplane import DataPlaneServer
from ale_robotics.evaluator.server.dataplane_calls import DataPlaneCalls
from ale_robotics.evaluator.server.messages import (
    SESSION_KINDS,
    capabilities,
    job_status,
    step_response,
    task_spaces,
)
from ale_robotics.evaluator.server.status import answer, rpc
from ale_robotics.evaluator.server.videos import VideoCalls
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.sessions.limits import settings_for
from ale_robotics.evaluator.sessions.manager import SessionManager, Watch
from ale_robotics.evaluator.sessions.types import AUTORESET_MODE, SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.evaluator.videos import VideoService
from ale_robotics.infos import encode_infos
from ale_robotics.tasks.brief import render_brief
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.tensors import from_tensor, numpy_dtype, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb
from ale_robotics.v1 import ale_env_pb2_grpc as pb_grpc

__all__ = ["Backends", "make_servicer"]

log = logging.getLogger(__name__)


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
    videos: VideoService


class _Servicer(VideoCalls, DataPlaneCalls, pb_grpc.AleEnvServicer):  # type: ignore[misc]
    def __init__(
        self,
        backends: Backends,
        role: Role,
        max_message_bytes: int,
        max_step_streams: int,
        auth: AuthInterceptor,
        data_plane: DataPlaneServer | None = None,
    ) -> None:
        self._tasks = backends.tasks
        self._data_plane = data_plane
        self._access = backends.access
        self._jobs = backends.jobs
        self._sessions = backends.sessions
        self._runs = backends.runs
        self._training = backends.training
        self._checkpoints = backends.checkpoints
        self._videos = backends.videos
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
            self._spaces[task.id] = task_spaces(task)
        return self._spaces[task.id]

    @rpc
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
            capabilities=self.with_data_plane(
                capabilities(task, shared=self._access.bound_run is None)
            ),
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

    @rpc
    def OpenSession(
        self, request: pb.OpenSessionRequest, context: grpc.ServicerContext
    ) -> pb.OpenSessionResponse:
        scope = self._scope(context)
        task = self._tasks.task(check_task(scope, request.task_id))
        kind = SESSION_KINDS.get(request.kind)
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

    @rpc
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

    @rpc
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

    @rpc
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
            scope = answer(functools.partial(self._scope, context), context, "StepStream")
            for request in requests:
                step = functools.partial(self._step, request, context, scope)
                yield answer(step, context, "Step")
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
            scope = answer(functools.partial(self._scope, context), context, "WatchSessions")
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

    @rpc
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

    @rpc
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

    @rpc
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

    @rpc
    def GetBatchEvalStatus(
        self, request: pb.GetBatchEvalStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetBatchEvalStatusResponse:
        job = self._jobs.job(request.job_id, request.run_id, self._scope(context))
        return job_status(
            job, coarse=self._role is Role.AGENT, queue_position=self._jobs.queue_position(job)
        )

    @rpc
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

    @rpc
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

    @rpc
    def CloseRun(
        self, request: pb.CloseRunRequest, context: grpc.ServicerContext
    ) -> pb.CloseRunResponse:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError("CloseRun is a harness-channel call")
        closed = self._runs.close_run(request.run_id)
        return pb.CloseRunResponse(
            sessions_closed=closed.sessions_closed, jobs_cancelled=closed.jobs_cancelled
        )

    @rpc
    def GetRunActivity(
        self, request: pb.GetRunActivityRequest, context: grpc.ServicerContext
    ) -> pb.GetRunActivityResponse:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError("GetRunActivity is a harness-channel call")
        run_id = self._access.own_run(request.run_id)
        return pb.GetRunActivityResponse(last_agent_call_unix=self._access.last_agent_call(run_id))


def make_servicer(
    backends: Backends,
    role: Role,
    max_message_bytes: int,
    max_step_streams: int,
    auth: AuthInterceptor,
    data_plane: DataPlaneServer | None = None,
) -> _Servicer:
    """The servicer of one listener: ``role`` fixed, translating to ``backends``;
    ``data_plane``: the shared-memory data plane beside it (agent Unix sockets only)."""
    return _Servicer(backends, role, max_message_bytes, max_step_streams, auth, data_plane)
