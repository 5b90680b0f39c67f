"""The index of a run's evaluation videos: ``runs/<run_id>/videos/videos.json``.

After the official result is recorded, the evaluator renders the run's first K hidden-seed
episodes again, off-screen (:mod:`ale_robotics.evaluator.videos`), and the harness fetches
them on its own channel into the run directory. This is what it writes beside the mp4
files, and what ``runs show`` and the report read: a separate file, so that rendering
changes nothing of ``result.json`` (its score, its timings) and a run without videos
(``--no-videos``, a task that does not render, an older run) simply has none.

It never holds a hidden seed: an episode is named by its index and its seed commitment,
exactly as in the ``EvalResult``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "VIDEOS_DIR",
    "VIDEO_INDEX",
    "EpisodeVideo",
    "VideoIndex",
    "VideoSource",
    "read_video_index",
]

VIDEOS_DIR = "videos"
"""The run directory's folder of videos."""
VIDEO_INDEX = "videos.json"
"""The index's file name, in :data:`VIDEOS_DIR`."""

VideoSource = Literal["policy", "replay", "session"]
"""How the rendered episode was played again: the submitted policy rolled out once more
(batch policy tasks), the submitted action sequences replayed (trajectory sets), or the
actions the agent sent in its eval session replayed (interactive tasks; the evaluator has
no policy of the agent's)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeVideo(_Model):
    """One rendered hidden-seed episode."""

    file: str = Field(description="The mp4's name in the videos folder: episode-<index>.mp4.")
    index: int = Field(description="The episode's position in the task's base seeds.")
    seed_commitment: str = Field(description="The commitment to its hidden seed (never the seed).")
    frames: int = Field(description="Frames in the video: the reset frame, then one per step.")
    fps: int = Field(description="Playback rate: the env's render_fps (the simulation's speed).")
    width: int
    height: int
    bytes: int = Field(description="Size of the mp4.")
    episode_return: float = Field(description="Return of the rendered episode.")
    official_return: float | None = Field(
        default=None, description="Return of the same episode in the official result."
    )
    matches_official: bool | None = Field(
        default=None,
        description="Whether the rendered episode reproduced the official one (same return "
        "and length): True for an exact replay; False when it did not (the note says how), "
        "for instance a policy re-rolled one env at a time where the official rollout was "
        "batched. The score is the official result's either way.",
    )
    note: str = Field(default="", description="What differs from the official episode, if so.")


class VideoIndex(_Model):
    """``videos.json``: the run's evaluation videos, or why there are none."""

    task_id: str
    run_id: str
    job_id: str = Field(description="The job whose official result the videos show.")
    source: VideoSource | None = Field(default=None, description="How episodes were replayed.")
    videos: list[EpisodeVideo] = Field(default_factory=list)
    requested: int = Field(description="Episodes asked for (the run's --videos K).")
    render_s: float = Field(
        default=0.0, description="Wall-clock seconds the evaluator spent rendering and encoding."
    )
    encoder: str = Field(default="", description="The encoder: imageio-ffmpeg, its ffmpeg, codec.")
    error: str | None = Field(
        default=None,
        description="Why some or all videos are missing (a task that does not render, a host "
        "without off-screen OpenGL, a failed render); logged, and the score stands.",
    )


def read_video_index(run_dir: Path) -> VideoIndex | None:
    """A run's ``videos/videos.json``, or None when it has none, or one this release cannot
    read (videos are never worth failing a reader of the run for)."""
    try:
        return VideoIndex.model_validate_json((run_dir / VIDEOS_DIR / VIDEO_INDEX).read_text())
    except (OSError, ValidationError):
        return None
