"""Evaluation videos: a run's first K hidden-seed episodes, rendered after its official result.

* :mod:`.store`: what the videos are made from (a batch job's frozen files, an eval
  session's taped actions) and the videos once made, in the state dir;
* :mod:`.tape`: the actions of an interactive run's first eval episodes;
* :mod:`.service`: renders a job's videos when the harness asks (GetEvalVideos, harness
  channel only), once, after the result is recorded;
* :mod:`.render`: the niced process that plays the episodes again off-screen;
* :mod:`.encode`: frames to H.264 mp4 (imageio-ffmpeg).

The harness writes them to ``runs/<run_id>/videos/`` with their index
(:class:`ale_robotics.model.video.VideoIndex`); the agent never reaches any of it.
"""

from ale_robotics.evaluator.videos.service import VIDEO_SIZE, NoVideos, VideoService, open_videos
from ale_robotics.evaluator.videos.store import VideoStore
from ale_robotics.evaluator.videos.tape import ActionTape

__all__ = ["VIDEO_SIZE", "ActionTape", "NoVideos", "VideoService", "VideoStore", "open_videos"]
