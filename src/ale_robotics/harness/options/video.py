"""The run options of the evaluation videos (``--videos K``, ``--no-videos``).

After the official result, the evaluator renders the run's first K hidden-seed episodes
and the harness writes them to ``runs/<run_id>/videos/`` (:mod:`..videos`); these options
say how many, or none. An eval set's SPEC sets them for every run (``videos``,
``no_videos``). Without ``--videos``, the environment variable ``ALE_VIDEOS`` (a count)
gives the default, else :data:`DEFAULT_VIDEOS`: ``ALE_VIDEOS=0`` turns them off for every
run of a shell or a test suite (rendering costs seconds per run on a CPU-only host).
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

from ale_robotics.harness.options.decl import Flag, OptionGroup

__all__ = ["DEFAULT_VIDEOS", "MAX_VIDEOS", "VIDEOS_ENV", "VideoOptions", "default_videos"]

DEFAULT_VIDEOS = 3
"""Episodes a run's videos show unless told otherwise."""
MAX_VIDEOS = 10
"""The most a run may ask for (the evaluator's limit per request)."""
VIDEOS_ENV = "ALE_VIDEOS"
"""The environment variable that sets the default of ``--videos``."""


def default_videos() -> int:
    """``--videos``' default: :data:`VIDEOS_ENV` when it holds a count from 0 to
    :data:`MAX_VIDEOS`, else :data:`DEFAULT_VIDEOS`."""
    given = os.environ.get(VIDEOS_ENV, "").strip()
    if given.isdigit() and int(given) <= MAX_VIDEOS:
        return int(given)
    return DEFAULT_VIDEOS


class VideoOptions(OptionGroup):
    """Which evaluation videos the run keeps."""

    videos: Annotated[int | None, Flag("--videos", metavar="K")] = Field(
        default=None,
        ge=0,
        le=MAX_VIDEOS,
        description="Render the first K hidden-seed episodes of the evaluation to "
        "runs/<run_id>/videos/*.mp4 after the official result (tasks whose env renders; "
        "never shown to the agent, never part of the score). Default: $ALE_VIDEOS, else 3.",
    )
    no_videos: Annotated[bool, Flag("--no-videos")] = Field(
        default=False, description="Render no evaluation videos (as --videos 0)."
    )

    @property
    def video_episodes(self) -> int:
        """Episodes to render: 0 with ``--no-videos``, else ``--videos`` or its default."""
        if self.no_videos:
            return 0
        return self.videos if self.videos is not None else default_videos()
