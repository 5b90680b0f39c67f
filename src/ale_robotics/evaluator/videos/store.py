"""Where the evaluator keeps what a run's videos are made from, and the videos once made.

Layout, in the state dir (private to the evaluator like the rest of it: the sources name
hidden seeds' episodes and the submitted files)::

    STATE_DIR/videos/<run_id>/<job_id>/
      submission/       hard links to a batch job's frozen files (the runner deletes the
                        job's snapshot when the job ends; the links keep the files)
      session.npz       an eval session's taped actions (:class:`.tape.ActionTape`)
      render-<K>/       the rendered episodes (episode-<index>.mp4) and videos.json

Kept only while the evaluator makes videos (``video_episodes`` > 0). A run's folder is
removed when the run is closed (CloseRun, or the embedded evaluator stopping), and any
folder left untouched for :data:`KEEP_S` by a process that died is removed when an
evaluator starts on the state dir.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np

from ale_robotics.evaluator.videos.tape import ActionTape

__all__ = ["KEEP_S", "VideoStore"]

log = logging.getLogger(__name__)

KEEP_S = 24 * 3600.0
"""How long an unclosed run's video folder is kept (a harness that died never fetched it)."""

SUBMISSION = "submission"
SESSION = "session.npz"


class VideoStore:
    """The state dir's ``videos/`` folder (see the module docstring)."""

    def __init__(self, root: Path, episodes: int) -> None:
        self.root = root
        self.episodes = episodes
        """The most episodes a run's videos show (0: this evaluator keeps and renders none)."""

    def job_dir(self, run_id: str, job_id: str) -> Path:
        return self.root / run_id / job_id

    def submission_dir(self, run_id: str, job_id: str) -> Path:
        return self.job_dir(run_id, job_id) / SUBMISSION

    def session_file(self, run_id: str, job_id: str) -> Path:
        return self.job_dir(run_id, job_id) / SESSION

    def keep_submission(self, run_id: str, job_id: str, snapshot: Path) -> None:
        """Hard-link a batch job's frozen files (copies where links cannot be made).

        Never fails the submission: a file that cannot be kept only costs the videos.
        """
        if self.episodes == 0:
            return
        dest = self.submission_dir(run_id, job_id)
        try:
            dest.mkdir(parents=True, mode=0o700)
            for src in snapshot.iterdir():
                try:
                    os.link(src, dest / src.name)
                except OSError:  # another filesystem, or links not allowed
                    shutil.copy2(src, dest / src.name)
        except OSError as exc:
            log.warning("job %s: its submission not kept for videos: %s", job_id, exc)

    def keep_tape(self, run_id: str, job_id: str, tape: ActionTape) -> None:
        """Write an eval session's taped actions; a failure is logged, never raised."""
        arrays = tape.arrays()
        if self.episodes == 0 or not arrays:
            return
        path = self.session_file(run_id, job_id)
        try:
            path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            with open(tmp, "wb") as fh:
                np.savez(fh, allow_pickle=False, **arrays)
            tmp.replace(path)
        except OSError as exc:
            log.warning("eval session %s: its actions not kept for videos: %s", job_id, exc)

    def remove_run(self, run_id: str) -> None:
        """Forget a closed run's sources and videos (the harness has fetched them)."""
        if run_id:
            shutil.rmtree(self.root / run_id, ignore_errors=True)

    def reclaim(self, now: float | None = None) -> list[str]:
        """Remove the run folders untouched for :data:`KEEP_S`; returns their run ids."""
        now = time.time() if now is None else now
        removed = []
        try:
            runs = list(self.root.iterdir())
        except OSError:
            return []
        for run in runs:
            try:
                newest = max([run.stat().st_mtime, *(p.stat().st_mtime for p in run.iterdir())])
            except OSError:
                continue
            if now - newest > KEEP_S:
                shutil.rmtree(run, ignore_errors=True)
                removed.append(run.name)
        return sorted(removed)
