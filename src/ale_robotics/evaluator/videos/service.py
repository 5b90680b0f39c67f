"""A job's evaluation videos, rendered when the harness asks for them (GetEvalVideos).

The official result is recorded first, and nothing here runs before the harness asks
(after it has read that result), so the measured evaluation, its timings and its
SUCCEEDED state never wait for a frame. What a video plays again:

* a batch policy task: the submitted policy, rolled out once more (``video_source``
  'policy' of the task's rollout kind);
* a trajectory-set task: the submitted action sequences (the kind's 'replay');
* an interactive task: the actions the agent sent in its first eval episodes, taped by
  the session (:mod:`.tape`), replayed on the same hidden seeds ('session');
* a planner task, or an env that renders no frames: nothing (the index says why).

The episodes are rendered by a niced process of their own (:mod:`.render`), once per job
and K (cached in the job's folder, :mod:`.store`). Nothing here can fail a run: every
failure becomes the index's ``error``, logged, and the score stands.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ale_robotics.evaluator.batch.plan import episode_plan, load_artifact
from ale_robotics.evaluator.batch.snapshot import snapshot_files
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import JobRecord
from ale_robotics.evaluator.videos.encode import encoder_name
from ale_robotics.evaluator.videos.render import (
    INPUTS,
    EpisodeToRender,
    Rendered,
    RenderRequest,
    rendered_file,
    request_file,
)
from ale_robotics.evaluator.videos.store import VideoStore
from ale_robotics.evaluator.videos.tape import tape_key
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.result import EvalResult
from ale_robotics.model.states import JobState
from ale_robotics.model.video import VIDEO_INDEX, VideoIndex, VideoSource
from ale_robotics.tasks.spec import TaskMode, TaskSpec

__all__ = ["RENDER_TIMEOUT_S", "VIDEO_SIZE", "NoVideos", "VideoService", "open_videos"]

log = logging.getLogger(__name__)

VIDEO_SIZE = (320, 240)
"""Width and height of the frames (MuJoCo envs): small enough that three 1000-step
episodes render and encode in seconds, a multiple of 16 as H.264 wants."""
RENDER_TIMEOUT_S = 300.0
"""The longest a job's rendering may take; past it the process is killed (the index says so)."""


class NoVideos(Exception):
    """Why a job has no videos (the index's ``error``); never a failure of the run."""


class VideoService:
    """Renders a job's first K hidden-seed episodes on request; see the module docstring."""

    def __init__(
        self,
        store: VideoStore,
        ledger: RunLedger,
        tasks: TaskCatalog,
        *,
        timeout_s: float = RENDER_TIMEOUT_S,
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._tasks = tasks
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._job_locks: dict[str, threading.Lock] = {}

    @property
    def store(self) -> VideoStore:
        return self._store

    def videos(self, job: JobRecord, episodes: int) -> tuple[VideoIndex, Path]:
        """The index of ``job``'s videos of its first ``episodes`` episodes (0: the
        evaluator's default) and the folder holding the files; rendered on the first call,
        read back after. Never raises for a job that cannot have videos: the index says why."""
        k = episodes if episodes > 0 else self._store.episodes
        folder = self._store.job_dir(job.run_id, job.job_id) / f"render-{k}"
        with self._lock:  # one render per job at a time; later calls read its cached index
            job_lock = self._job_locks.setdefault(job.job_id, threading.Lock())
        try:
            with job_lock:
                return self._cached_or_rendered(job, k, folder)
        finally:
            with self._lock:
                self._job_locks.pop(job.job_id, None)

    def _cached_or_rendered(self, job: JobRecord, k: int, folder: Path) -> tuple[VideoIndex, Path]:
        cached = folder / VIDEO_INDEX
        if cached.is_file():
            return VideoIndex.model_validate_json(cached.read_text()), folder
        base = VideoIndex(task_id=job.task_id, run_id=job.run_id, job_id=job.job_id, requested=k)
        try:
            index = self._render(job, k, folder, base)
        except NoVideos as why:
            index = base.model_copy(update={"error": str(why)})
        except Exception as exc:  # a bug or the host: the run keeps its score regardless
            log.exception("job %s: videos not rendered", job.job_id)
            index = base.model_copy(update={"error": f"{type(exc).__name__}: {exc}"})
        if index.error:
            log.warning("job %s: %s", job.job_id, index.error)
        try:
            folder.mkdir(parents=True, mode=0o700, exist_ok=True)
            cached.write_text(index.model_dump_json(indent=2))
        except OSError as exc:
            log.warning("job %s: the videos' index not cached: %s", job.job_id, exc)
        return index, folder

    def _render(self, job: JobRecord, k: int, folder: Path, base: VideoIndex) -> VideoIndex:
        if self._store.episodes == 0:
            raise NoVideos("this evaluator makes no videos (started with --videos 0)")
        if k < 1:
            raise NoVideos("no episodes asked for")
        if job.state is not JobState.SUCCEEDED or job.result_json is None:
            raise NoVideos(
                f"job {job.job_id} is {job.state.value}: videos show the episodes "
                "of an official result"
            )
        task = self._tasks.spec(job.task_id)
        if "rgb_array" not in rendering.offered_modes(task):
            raise NoVideos(
                f"task {task.id} renders no frames on this evaluator (its env offers "
                "no rgb_array mode, or this host has no off-screen OpenGL)"
            )
        result = EvalResult.model_validate_json(job.result_json)
        folder.mkdir(parents=True, mode=0o700, exist_ok=True)
        source, plan, short = self._inputs(job, task, k, folder / INPUTS)
        official = {e.index: e for e in result.episodes}
        seeds = {s.index: s for s in self._ledger.hidden_seeds(task, job.run_id)}
        episodes = [
            EpisodeToRender(
                index=index,
                env_seed=env_seed,
                seed_commitment=seeds[index].commitment,
                official_return=official[index].episode_return if index in official else None,
                official_length=official[index].length if index in official else None,
            )
            for index, env_seed in plan
        ]
        width, height = VIDEO_SIZE
        request = RenderRequest(
            task_json=task.model_dump_json(),
            source=source,
            episodes=episodes,
            width=width,
            height=height,
        )
        t0 = time.monotonic()
        rendered = self._run_renderer(folder, request)
        error = rendered.error or short
        return base.model_copy(
            update={
                "source": source,
                "videos": rendered.videos,
                "render_s": round(time.monotonic() - t0, 3),
                "encoder": encoder_name(),
                "error": error,
            }
        )

    def _inputs(
        self, job: JobRecord, task: TaskSpec, k: int, inputs: Path
    ) -> tuple[VideoSource, list[tuple[int, int]], str | None]:
        """What the renderer plays, written to ``inputs``: the source, ``(index, env seed)``
        of the episodes, and why fewer than ``k`` are there (None: all are)."""
        seeds = self._ledger.hidden_seeds(task, job.run_id)
        if task.mode is TaskMode.INTERACTIVE:
            tape = self._store.session_file(job.run_id, job.job_id)
            if not tape.is_file():
                raise NoVideos("the eval session's actions were not kept for videos")
            shutil.copyfile(tape, inputs)
            with np.load(inputs, allow_pickle=False) as arrays:
                kept = set(arrays.files)
            plan = [(s.index, s.value) for s in seeds[:k] if tape_key(s.index) in kept]
            short = None
            if len(plan) < min(k, len(seeds)):
                short = (
                    f"the evaluator kept the actions of the first {len(plan)} eval episodes "
                    f"only ({k} asked for; evaluator serve --videos sets how many)"
                )
            return "session", plan, short
        kind = get_kind(task.eval.rollout)
        if kind.video_source is None:
            raise NoVideos(f"rollout kind {kind.name!r} makes no videos")
        folder = self._store.submission_dir(job.run_id, job.job_id)
        if not folder.is_dir():
            raise NoVideos("the submission was not kept for videos")
        artifact = load_artifact(snapshot_files(folder, job, task), task)
        with open(inputs, "wb") as fh:
            np.savez(fh, allow_pickle=False, **artifact)
        source: VideoSource = "replay" if kind.video_source == "replay" else "policy"
        return source, sorted(episode_plan(task, seeds))[:k], None

    def _run_renderer(self, folder: Path, request: RenderRequest) -> Rendered:
        """:mod:`.render` on ``folder``, the episodes shared among :func:`render_processes`
        processes; the inputs (the submission, the env seeds) are removed once they ended,
        whatever happened."""
        n = render_processes(len(request.episodes))
        parts = [request.episodes[i::n] for i in range(n)]
        procs: list[subprocess.Popen[str]] = []
        deadline = time.monotonic() + self._timeout_s
        try:
            for part, episodes in enumerate(parts):
                share = request.model_copy(update={"episodes": episodes})
                request_file(folder, part).write_text(share.model_dump_json())
                command = [sys.executable, "-m", "ale_robotics.evaluator.videos", str(folder)]
                procs.append(
                    subprocess.Popen(
                        [*command, str(part)],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            for p in procs:
                _wait(p, deadline, self._timeout_s)
            return _merge(folder, n)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for part in range(n):
                request_file(folder, part).unlink(missing_ok=True)
                rendered_file(folder, part).unlink(missing_ok=True)
            (folder / INPUTS).unlink(missing_ok=True)


def render_processes(episodes: int) -> int:
    """How many renderer processes share a job's ``episodes``: one per two cores of the
    host (the other for whatever else it runs), at most one per episode."""
    return max(1, min(episodes, (os.cpu_count() or 2) // 2))


def _wait(proc: subprocess.Popen[str], deadline: float, limit_s: float) -> None:
    """Wait for one renderer until ``deadline``; NoVideos when it ran past or failed."""
    try:
        _, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise NoVideos(f"rendering took longer than {limit_s:.0f} s") from None
    if proc.returncode != 0:
        tail = (err or "").strip().splitlines()[-3:]
        raise NoVideos(f"the renderer exited with {proc.returncode}: {' | '.join(tail)}")


def _merge(folder: Path, parts: int) -> Rendered:
    """The renderers' results as one, in episode order, their errors joined."""
    rendered = [
        Rendered.model_validate_json(rendered_file(folder, part).read_text())
        for part in range(parts)
    ]
    videos = sorted((v for r in rendered for v in r.videos), key=lambda v: v.index)
    errors = [r.error for r in rendered if r.error]
    return Rendered(videos=videos, error="; ".join(errors) or None)


def open_videos(
    state_root: Path, episodes: int, ledger: RunLedger, tasks: TaskCatalog
) -> VideoService:
    """The video service of an evaluator on ``state_root`` making videos of up to ``episodes``
    episodes a run, its store's leftovers of runs long gone removed first
    (:meth:`.store.VideoStore.reclaim`)."""
    store = VideoStore(state_root / "videos", episodes)
    store.reclaim()
    return VideoService(store, ledger, tasks)
