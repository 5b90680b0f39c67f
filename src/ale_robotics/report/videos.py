"""A run's evaluation videos on its page: the mp4s copied beside it, one ``<video>`` each.

The harness writes them to ``runs/<run_id>/videos/`` with their index
(:class:`~ale_robotics.model.video.VideoIndex`); here each file the index names is copied
into the run's folder of the site when it is what it says (a regular file, never a
symlink out of the run directory, within :data:`MAX_VIDEO_BYTES`, an ISO media file), so
the page's relative links work wherever the site is served from.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ale_robotics.model.video import VIDEOS_DIR, read_video_index
from ale_robotics.scoring.report import fmt_number

__all__ = ["MAX_VIDEO_BYTES", "VideoItem", "VideosView", "video_view"]

MAX_VIDEO_BYTES: Final = 256 * 1024 * 1024
_FTYP: Final = b"ftyp"  # bytes 4..8 of an mp4 (its first box)


@dataclass(frozen=True)
class VideoItem:
    src: str
    """Relative to the run's page."""
    title: str
    caption: str
    width: int
    height: int


@dataclass(frozen=True)
class VideosView:
    items: list[VideoItem] = field(default_factory=list)
    error: str | None = None
    """Why some or all videos are missing (the index's), or that a file could not be shown."""


def _copy_video(src: Path, dest: Path) -> bool:
    try:
        if src.is_symlink() or not src.is_file() or src.stat().st_size > MAX_VIDEO_BYTES:
            return False
        with src.open("rb") as f:
            if f.read(8)[4:] != _FTYP:
                return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    except OSError:
        return False
    return True


def video_view(run_dir: Path, page: str, out: Path) -> VideosView | None:
    """The run's videos for its page (None: the run has no videos index), each copied to
    ``out/runs/<page>/videos/``."""
    index = read_video_index(run_dir)
    if index is None:
        return None
    items, missing = [], []
    for v in index.videos:
        if Path(v.file).name != v.file or not _copy_video(
            run_dir / VIDEOS_DIR / v.file, out / "runs" / page / VIDEOS_DIR / v.file
        ):
            missing.append(v.file)
            continue
        same = {True: "", False: "; differs from the official episode: " + v.note, None: ""}
        items.append(
            VideoItem(
                src=f"{page}/{VIDEOS_DIR}/{v.file}",
                title=f"Episode {v.index}",
                caption=(
                    f"seed commitment {v.seed_commitment[:12]}..., {v.frames} frames at "
                    f"{v.fps} fps, return {fmt_number(v.episode_return)}"
                    f"{same[v.matches_official]}"
                ),
                width=v.width,
                height=v.height,
            )
        )
    errors = [e for e in (index.error, missing and f"not shown: {', '.join(missing)}") if e]
    return VideosView(items=items, error="; ".join(errors) or None)
