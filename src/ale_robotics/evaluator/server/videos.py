"""GetEvalVideos: a job's evaluation videos, streamed on the harness channel only.

A module of its own (the servicer's other calls are :mod:`.servicer`'s) because it is the
one call that streams files: the index first, then each mp4 in pieces small enough for
any listener's message limit. The role check comes before anything is read or rendered,
so an agent's token learns nothing from it, not even whether the job exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc

from ale_robotics.errors import InvalidArgumentError, PermissionDeniedError
from ale_robotics.evaluator.batch.jobs import JobService
from ale_robotics.evaluator.server.auth import Role
from ale_robotics.evaluator.server.status import answer
from ale_robotics.evaluator.videos import VideoService
from ale_robotics.model.video import VideoIndex
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["CHUNK_BYTES", "MAX_VIDEO_EPISODES", "VideoCalls"]

CHUNK_BYTES = 1024 * 1024
"""Bytes of a file per message (below every listener's max_message_bytes)."""
MAX_VIDEO_EPISODES = 10
"""The most episodes one request may ask to render."""


class VideoCalls:
    """The servicer's GetEvalVideos (mixed into it: ``_role``, ``_jobs`` and ``_videos``)."""

    _role: Role
    _jobs: JobService
    _videos: VideoService

    def GetEvalVideos(
        self, request: pb.GetEvalVideosRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.EvalVideoChunk]:
        index, folder = answer(lambda: self._videos_for(request), context, "GetEvalVideos")
        yield pb.EvalVideoChunk(index_json=index.model_dump_json())
        for video in index.videos:
            with open(folder / video.file, "rb") as fh:
                while piece := fh.read(CHUNK_BYTES):
                    yield pb.EvalVideoChunk(name=video.file, data=piece)

    def _videos_for(self, request: pb.GetEvalVideosRequest) -> tuple[VideoIndex, Path]:
        if self._role is not Role.HARNESS:
            raise PermissionDeniedError(
                "GetEvalVideos answers only on the harness channel: the videos show hidden-seed "
                "episodes"
            )
        if not 0 <= request.episodes <= MAX_VIDEO_EPISODES:
            raise InvalidArgumentError(
                f"episodes {request.episodes}: ask for 0 (the evaluator's default) to "
                f"{MAX_VIDEO_EPISODES}"
            )
        job = self._jobs.job(request.job_id, request.run_id)
        return self._videos.videos(job, request.episodes)
