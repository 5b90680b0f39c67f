"""The trusted record of an eval session: one job row per run, signed events, the EvalResult.

An eval session is stored exactly like a batch job so that nothing downstream
changes: the harness reads ``GetBatchEvalStatus(run_id)`` then
``GetEvalResult(run_id)`` and scores the ``EvalResult`` as in batch mode, and
the run's signed events land in its trajectory.

* The job row is created when the session opens, ``RUNNING``, with the fixed
  client token :data:`EVAL_SESSION_TOKEN`. The store's ``UNIQUE(run_id,
  client_token)`` then makes "one eval session per run" atomic and durable: a
  second OpenSession for the run finds the row and is refused, even after an
  evaluator restart. Progress (episodes done) and heartbeats go to the row, so
  status is live during the session. The row is held by the evaluator process
  that opened the session, under a lease its runner renews on a timer (:mod:`.store`),
  so an agent that thinks for a while between steps does not lose it.
* When that process dies, the lease runs out; the next evaluator to look
  (``Evaluator.reap_expired``) ends the row ``FAILED`` (infrastructure) in the
  same transaction that finds it expired, never requeued (the session's envs
  died with the process), and :func:`fail_interrupted` signs that result.
* A row that stopped being this process's (the run was cancelled) gets no
  more events and no result from :meth:`EvalRecorder.finish`.
* Events: ``session_opened``, then ``training_steps`` (the run's practice
  steps so far against its training budget), one ``episode_summary`` per
  episode (return, length, whether it was abandoned and how many of its steps
  the agent took), then ``training_steps`` again (the count the result
  carries), ``progress_summary`` and ``result`` with the same payloads as a
  batch job. An abandoned episode was completed with the null action before it
  was summarized (:mod:`.vector_session`), so every successful result covers
  the whole budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ale_robotics import __version__
from ale_robotics.errors import FailedPreconditionError, OutOfRangeError
from ale_robotics.evaluator.pipeline import EpisodeOutcome, summarize
from ale_robotics.evaluator.result import (
    EpisodeRecord,
    EvalResult,
    Timings,
    TrainingUsage,
    host_info,
    simulator_versions,
)
from ale_robotics.evaluator.store import FailureSource, JobState
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.evaluator.core import Evaluator

__all__ = ["EVAL_SESSION_TOKEN", "EvalRecorder", "fail_interrupted"]

EVAL_SESSION_TOKEN = "interactive-eval-session"
"""Client token of a run's eval-session job row; one such row per run."""

_HEARTBEAT_EVERY_S = 1.0


class EvalRecorder:
    """Opens the run's eval job (refusing a second one) and records what the session simulated."""

    def __init__(
        self, evaluator: Evaluator, task: TaskSpec, run_id: str, session_id: str, num_envs: int
    ) -> None:
        self._ev = evaluator
        self.task = task
        self.run_id = run_id
        self.session_id = session_id
        self.seeds = evaluator.hidden_seeds(task, run_id)
        self._budget = evaluator.training_budget(task)
        job, existing = evaluator.store.create(
            run_id=run_id,
            task_id=task.id,
            client_token=EVAL_SESSION_TOKEN,
            episodes_total=task.eval.episodes,
            files={},
            state=JobState.RUNNING,
        )
        if existing:
            if job.terminal:
                raise OutOfRangeError(
                    f"run {run_id} has had its eval session ({job.job_id}, {job.state.value}): "
                    f"a run gets one eval session of {task.eval.episodes} episodes"
                )
            raise FailedPreconditionError(
                f"run {run_id} already has an open eval session ({job.job_id}); use it or "
                "close it with CloseSession"
            )
        self.job_id = job.job_id
        self._t0 = time.monotonic()
        self._beat = self._t0
        self.finished = False
        evaluator.event(
            run_id,
            task,
            "session_opened",
            {
                "job_id": self.job_id,
                "session_id": session_id,
                "kind": "eval",
                "num_envs": num_envs,
                "episodes": task.eval.episodes,
                "max_episode_steps": task.env.max_episode_steps,
            },
        )
        self._training_event("eval_session_opened")

    def _training_event(self, phase: str) -> TrainingUsage:
        """Sign the run's practice count now: what it had trained when ``phase`` happened."""
        usage = self._ev.training.usage(self.run_id, self._budget)
        self._ev.event(
            self.run_id,
            self.task,
            "training_steps",
            {
                "job_id": self.job_id,
                "session_id": self.session_id,
                "phase": phase,
                **usage.model_dump(),
            },
        )
        return usage

    def heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._beat >= _HEARTBEAT_EVERY_S:
            self._beat = now
            self._ev.store.heartbeat(self.job_id)

    def episode_ended(self, record: EpisodeRecord, done: int) -> None:
        self._ev.event(
            self.run_id,
            self.task,
            "episode_summary",
            {"job_id": self.job_id, "session_id": self.session_id, **record.model_dump()},
        )
        self._ev.store.progress(self.job_id, done)

    def finish(
        self,
        records: Iterable[EpisodeRecord],
        env_steps: int,
        failure: str | None,
        infrastructure: bool = False,
    ) -> None:
        """Store the official result: SUCCEEDED with metrics, or FAILED with why and whose fault."""
        if self.finished:
            return
        self.finished = True
        if not self._ev.store.heartbeat(self.job_id):
            return  # cancelled (or taken from this process): the row's state stands
        source = FailureSource.NONE
        if failure:
            source = FailureSource.INFRASTRUCTURE if infrastructure else FailureSource.SUBMISSION
        episodes = sorted(records, key=lambda r: r.index)
        wall = time.monotonic() - self._t0
        training = self._training_event("eval_session_ended")
        state = JobState.FAILED if failure else JobState.SUCCEEDED
        metrics = (
            {}
            if failure
            else summarize(
                [
                    EpisodeOutcome(
                        r.index, r.episode_return, r.length, r.terminated, success=r.success
                    )
                    for r in episodes
                ],
                (m.name for m in self.task.metrics),
            )
        )
        self._ev.event(
            self.run_id,
            self.task,
            "progress_summary",
            {
                "job_id": self.job_id,
                "session_id": self.session_id,
                "episodes_done": len(episodes),
                "episodes_total": self.task.eval.episodes,
                "env_steps": env_steps,
                "wall_s": round(wall, 3),
            },
        )
        result = EvalResult(
            job_id=self.job_id,
            run_id=self.run_id,
            task_id=self.task.id,
            task_config_sha256=self._ev.registry.entry(self.task.id).sha256,
            state=state.value,
            failure_source=source.value,
            failure_reason=failure or "",
            metrics=metrics,
            episodes=episodes,
            secret_sha256=self._ev.secret_sha256,
            evaluator_version=__version__,
            simulator_versions=simulator_versions(self.task.simulator.package),
            host=host_info(),
            timings=Timings(
                wall_s=wall,
                env_steps=env_steps,
                env_steps_per_s=env_steps / wall if wall > 0 else 0.0,
                workers=1,
            ),
            smoke_run=self._ev.smoke_run(self.task.id),
            training=training,
        )
        payload: dict[str, object] = {"job_id": self.job_id, "state": state.value}
        if failure:
            payload.update(failure_source=source.value, reason=failure)
        else:
            payload.update(metrics=metrics)
        payload["episode_returns"] = [r.episode_return for r in episodes]
        if result.smoke_run is not None:
            payload["smoke_run"] = result.smoke_run.model_dump()
        self._ev.event(self.run_id, self.task, "result", payload)
        self._ev.store.finish(
            self.job_id,
            state,
            owned=True,
            failure_source=source,
            failure_reason=failure or "",
            result_json=result.model_dump_json(),
            episodes_done=len(episodes),
        )


def fail_interrupted(evaluator: Evaluator, failed: Iterable[str]) -> list[str]:
    """Sign the end of eval-session jobs whose evaluator died during the session.

    The store already ended them FAILED (``JobStore.requeue_expired`` with
    :data:`EVAL_SESSION_TOKEN` among its ``fail_tokens``); this adds the signed
    ``result`` event, so the run's record says so too. Returns their ids.
    """
    done = []
    for job_id in failed:
        job = evaluator.store.get(job_id)
        if job is None or job.client_token != EVAL_SESSION_TOKEN:
            continue
        evaluator.event(
            job.run_id,
            evaluator.spec(job.task_id),
            "result",
            {"job_id": job_id, "state": "FAILED", "failure_source": "infrastructure"},
        )
        done.append(job_id)
    return done
