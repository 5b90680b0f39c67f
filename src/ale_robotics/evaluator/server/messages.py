"""The wire form of the evaluator's records: job states, steps, capabilities, tensor specs.

Split from :mod:`.servicer`, which calls these, so that the servicer reads as the list of
calls it answers and what each one asks of which service.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.sessions.types import (
    AUTORESET_MODE,
    AUTORESET_MODES,
    Batch,
    SessionKind,
)
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.infos import encode_infos
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.tensors import proto_dtype, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = [
    "FAILURE_SOURCES",
    "JOB_STATES",
    "SESSION_KINDS",
    "box_spec",
    "capabilities",
    "job_status",
    "step_response",
    "task_spaces",
]

JOB_STATES = {s: getattr(pb, f"JOB_STATE_{s.value}") for s in JobState}
FAILURE_SOURCES = {
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


SESSION_KINDS = {
    pb.SESSION_KIND_PRACTICE: SessionKind.PRACTICE,
    pb.SESSION_KIND_EVAL: SessionKind.EVAL,
}


def capabilities(task: TaskSpec, shared: bool) -> list[str]:
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


def box_spec(name: str, space: Any) -> pb.TensorSpec:
    spec = pb.TensorSpec(name=name, dtype=proto_dtype(space.dtype), shape=list(space.shape))
    if hasattr(space, "low"):
        spec.low.CopyFrom(to_tensor(np.asarray(space.low)))
        spec.high.CopyFrom(to_tensor(np.asarray(space.high)))
    return spec


def job_status(
    job: JobRecord, *, coarse: bool, queue_position: int
) -> pb.GetBatchEvalStatusResponse:
    """The job's status; coarse on the agent channel.

    The moment each hidden episode ends tells how long it lasted, and for many
    tasks an episode's length is its return (an inverted pendulum earns 1 per
    step until it falls). So the agent channel gets no per-episode progress:
    episodes_done is 0 until the job SUCCEEDED, no heartbeat (every progress
    update is one), and updated_unix only for state changes (0 while RUNNING,
    when the row changes with each episode). The harness channel keeps it all.
    """
    done, heartbeat, updated = job.episodes_done, job.heartbeat, job.updated
    if coarse:
        done = job.episodes_total if job.state is JobState.SUCCEEDED else 0
        heartbeat = 0.0
        updated = 0.0 if job.state is JobState.RUNNING else job.updated
    return pb.GetBatchEvalStatusResponse(
        job_id=job.job_id,
        task_id=job.task_id,
        state=JOB_STATES[job.state],
        progress=pb.Progress(episodes_done=done, episodes_total=job.episodes_total, coarse=coarse),
        # an embedded evaluator runs only its run's jobs: other runs' are not ahead
        queue_position=queue_position,
        failure_source=FAILURE_SOURCES[job.failure_source],
        failure_reason=job.failure_reason,
        heartbeat_unix=heartbeat,
        created_unix=job.created,
        updated_unix=updated,
    )


def task_spaces(task: TaskSpec) -> tuple[pb.TensorSpec, pb.TensorSpec]:
    """The task's observation and action specs, read off a fresh env (goal envs' dict
    observations as their flat Box view, as the client sees them)."""
    import gymnasium as gym

    env = make_env(task.env, time_limit=False)
    try:
        obs_space = env.observation_space
        if isinstance(obs_space, gym.spaces.Dict):  # goal envs (Fetch): flat Box view
            obs_space = gym.spaces.flatten_space(obs_space)
        return box_spec("observation", obs_space), box_spec("action", env.action_space)
    finally:
        env.close()
