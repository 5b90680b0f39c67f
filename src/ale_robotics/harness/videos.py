"""A scored run's evaluation videos, fetched into ``runs/<run_id>/videos/``.

Once result.json is written, the harness asks the evaluator on its own channel
(GetEvalVideos: the harness token; the agent's is refused) for the official job's first K
hidden-seed episodes, rendered off-screen there (:mod:`ale_robotics.evaluator.videos`), and
writes each mp4 (``episode-<index>.mp4``) and the index (``videos.json``, a
:class:`~ale_robotics.model.video.VideoIndex`) into the run directory, which no agent
sandbox shows. result.json is not touched: the score and its timings are what they were
before any frame was drawn. Nothing here fails the run: an evaluator that cannot render,
answers an error or goes away leaves an index that says why (logged), or no videos.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pydantic

from ale_robotics.client.sdk import AleClient
from ale_robotics.errors import AleError, from_rpc_error
from ale_robotics.model.video import VIDEO_INDEX, VIDEOS_DIR, VideoIndex
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["FETCH_TIMEOUT_S", "fetch_videos"]

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 420.0
"""The longest the harness waits for a run's videos (the evaluator's render limit, 300 s,
and the transfer)."""


def fetch_videos(
    harness: AleClient,
    run_dir: Path,
    job_id: str,
    episodes: int,
    *,
    timeout_s: float = FETCH_TIMEOUT_S,
) -> VideoIndex | None:
    """Fetch job ``job_id``'s videos of its first ``episodes`` episodes into
    ``run_dir/videos/``; the index written, or None when the evaluator could not be asked
    (an evaluator of an older release, gone, or refusing: logged)."""
    request = pb.GetEvalVideosRequest(job_id=job_id, episodes=episodes)
    folder = run_dir / VIDEOS_DIR
    try:
        stream = harness.stub.GetEvalVideos(request, metadata=harness.metadata, timeout=timeout_s)
        return _write(stream, folder)
    except grpc.RpcError as err:
        exc = from_rpc_error(err)
        log.warning("the run's videos could not be fetched: %s", exc.message)
    except (AleError, OSError, pydantic.ValidationError) as exc:
        log.warning("the run's videos could not be written: %s", exc)
    shutil.rmtree(folder, ignore_errors=True)  # no half a video
    return None


def _write(stream: Iterator[pb.EvalVideoChunk], folder: Path) -> VideoIndex:
    """The stream's index, then its files' pieces, into ``folder``; the index last, so a
    folder with an index is a complete one."""
    first = next(stream)
    index = VideoIndex.model_validate_json(first.index_json)
    names = {v.file for v in index.videos}
    if any(Path(name).name != name or name.startswith(".") for name in names):
        raise OSError(f"the evaluator's index names a path, not a file: {sorted(names)}")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    handles = {}
    try:
        for chunk in stream:
            name = chunk.name
            if name not in names:  # only the files the index names, only plain names
                raise OSError(f"the evaluator sent a file the index does not name: {name!r}")
            if name not in handles:
                handles[name] = open(folder / name, "wb")  # noqa: SIM115 (closed below)
            handles[name].write(chunk.data)
    finally:
        for fh in handles.values():
            fh.close()
    missing = sorted(names - set(handles))
    if missing:
        raise OSError(f"the evaluator's stream ended without {', '.join(missing)}")
    (folder / VIDEO_INDEX).write_text(index.model_dump_json(indent=2))
    return index
