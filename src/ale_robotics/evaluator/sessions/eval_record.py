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
  (:meth:`.batch.jobs.JobService.reap_expired`) ends the row ``FAILED`` (infrastructure) in the
  same transaction that finds it expired, never requeued (the session's envs
  died with the process), and :meth:`EvalRecords.fail_interrupted` signs that result.
* A row that stopped being this process's (the run was cancelled) gets no
  more events and no result from :meth:`EvalRecorder.finish`.
* Events: ``session_opened``, then ``training_steps`` (the run's practice
  steps so far against its training budget), one ``episode_summary`` per
  episode (return, length, whether it was abandoned and how many of its steps
  the agent took), then ``training_steps`` again (the count the result
  carries), ``progress_summary`` and ``result`` with the same payloads as a
  batch job; the result carries the task's floor (:mod:`.floor`), measured when the
  session ends. An abandoned episode was completed with the null action before it
  was summarized (:mod:`.vector`), so every successful result covers
  the whole budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ale_robotics.errors import FailedPreconditionError, OutOfRangeError
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.results.builder import ResultBuilder, session_outcomes
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.sessions.floor import measure_floor
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import JobQueue
from ale_robotics.evaluator.videos.store import VideoStore
from ale_robotics.evaluator.videos.tape import ActionTape
from ale_robotics.model.result import EpisodeRecord, TrainingUsage
from ale_robotics.model.states import JobState
from ale_robotics.tasks.registry import TrainingBudget
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["EVAL_SESSION_TOKEN", "EvalRecorder", "EvalRecords"]

EVAL_SESSION_TOKEN = "interactive-eval-session"
"""Client token of a run's eval-session job row; one such row per run."""

_HEARTBEAT_EVERY_S = 1.0


class EvalRecords:
    """The eval-session records of one evaluator: opens them, and ends interrupted ones.

    Holds what every record needs (the job store, the run ledger, the result
    builder, the practice-step ledger and the task lookups), so that the session
    manager only asks for a record, and the job service for the end of the ones
    whose evaluator died.
    """

    def __init__(
        self,
        store: JobQueue,
        ledger: RunLedger,
        results: ResultBuilder,
        training: TrainingLedger,
        tasks: TaskCatalog,
        videos: VideoStore | None = None,
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._results = results
        self._training = training
        self._tasks = tasks
        self._videos = videos

    def open(self, task: TaskSpec, run_id: str, session_id: str, num_envs: int) -> EvalRecorder:
        """The run's eval job, opened now (refused when the run had one)."""
        return EvalRecorder(
            self._store,
            self._ledger,
            self._results,
            self._training,
            self._tasks.training_budget(task),
            task,
            run_id,
            session_id,
            num_envs,
            self._videos,
        )

    def fail_interrupted(self, failed: Iterable[str]) -> list[str]:
        """Sign the end of eval-session jobs whose evaluator died during the session.

        The store already ended them FAILED (``JobQueue.requeue_expired`` with
        :data:`EVAL_SESSION_TOKEN` among its ``fail_tokens``); this adds the signed
        ``result`` event, so the run's record says so too. Returns their ids.
        """
        done = []
        for job_id in failed:
            job = self._store.get(job_id)
            if job is None or job.client_token != EVAL_SESSION_TOKEN:
                continue
            self._ledger.event(
                job.run_id,
                self._tasks.spec(job.task_id),
                "result",
                self._results.infrastructure_failure(job_id),
            )
            done.append(job_id)
        return done


class EvalRecorder:
    """Opens the run's eval job (refusing a second one) and records what the session simulated."""

    def __init__(
        self,
        store: JobQueue,
        ledger: RunLedger,
        results: ResultBuilder,
        training: TrainingLedger,
        budget: TrainingBudget | None,
        task: TaskSpec,
        run_id: str,
        session_id: str,
        num_envs: int,
        videos: VideoStore | None = None,
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._results = results
        self._training = training
        self._budget = budget
        self.task = task
        self.run_id = run_id
        self.session_id = session_id
        self.seeds = ledger.hidden_seeds(task, run_id)
        self._videos = videos if videos is not None and videos.episodes > 0 else None
        self.tape = (
            ActionTape(min(self._videos.episodes, task.eval.episodes))
            if self._videos is not None and "rgb_array" in rendering.offered_modes(task)
            else None
        )
        """The actions of the first eval episodes, kept for their videos once the result is
        recorded (None: no videos of this task here); the session records into it."""
        job, existing = store.create(
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
        results.job_started(job.job_id)
        self._t0 = time.monotonic()
        self._beat = self._t0
        self.finished = False
        ledger.event(
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
        usage = self._training.usage(self.run_id, self._budget)
        self._ledger.event(
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
            self._store.heartbeat(self.job_id)

    def episode_ended(self, record: EpisodeRecord, done: int) -> None:
        self._ledger.event(
            self.run_id,
            self.task,
            "episode_summary",
            {"job_id": self.job_id, "session_id": self.session_id, **record.model_dump()},
        )
        self._store.progress(self.job_id, done)

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
        if not self._store.heartbeat(self.job_id):
            return  # cancelled (or taken from this process): the row's state stands
        episodes = sorted(records, key=lambda r: r.index)
        wall = time.monotonic() - self._t0
        training = self._training_event("eval_session_ended")
        metrics = (
            {}
            if failure
            else summarize(session_outcomes(episodes), (m.name for m in self.task.metrics))
        )
        self._ledger.event(
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
        floor = (None, "") if failure else measure_floor(self.task, self.seeds)
        verdict = self._results.eval_session(
            job_id=self.job_id,
            run_id=self.run_id,
            task=self.task,
            episodes=episodes,
            metrics=metrics,
            failure=failure,
            infrastructure=infrastructure,
            wall_s=wall,
            env_steps=env_steps,
            training=training,
            floor=floor,
        )
        self._ledger.event(self.run_id, self.task, "result", verdict.payload)
        result = verdict.result
        self._store.finish(
            self.job_id,
            result.state,
            owned=True,
            failure_source=result.failure_source,
            failure_reason=result.failure_reason,
            result_json=result.model_dump_json(),
            episodes_done=len(episodes),
        )
        if self._videos and self.tape and result.state is JobState.SUCCEEDED:  # for its videos
            self._videos.keep_tape(self.run_id, self.job_id, self.tape)
