"""Frames to an H.264 mp4, with the ffmpeg binary that the imageio-ffmpeg wheel ships.

H.264 in yuv420p with the index at the front of the file (``+faststart``): what every
browser's ``<video>`` plays, so that the report shows the file as it is. The frames' size
must be a multiple of 16 (the codec's macroblock); the renderer asks for such a size.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CODEC", "Mp4Writer", "encoder_name"]

CODEC = "libx264"


def encoder_name() -> str:
    """What encodes the videos, for their index: the package, its ffmpeg and the codec."""
    import imageio_ffmpeg

    return (
        f"imageio-ffmpeg {imageio_ffmpeg.__version__} "
        f"(ffmpeg {imageio_ffmpeg.get_ffmpeg_version()}, {CODEC})"
    )


class Mp4Writer:
    """An mp4 being written, one RGB frame at a time (the size is the first frame's)."""

    def __init__(self, path: Path, fps: int) -> None:
        self.path = path
        self.fps = fps
        self.frames = 0
        self.size: tuple[int, int] | None = None
        self._gen: Generator[Any, Any, None] | None = None

    def add(self, frame: npt.NDArray[np.uint8]) -> None:
        """Append ``frame`` (``[height, width, 3]`` uint8, every frame the same size)."""
        height, width = frame.shape[:2]
        if self._gen is None:
            import imageio_ffmpeg

            self.size = (width, height)
            self._gen = imageio_ffmpeg.write_frames(
                str(self.path),
                (width, height),
                fps=self.fps,
                codec=CODEC,
                macro_block_size=1,  # the renderer's size is a multiple of 16 already
                ffmpeg_log_level="error",
                output_params=["-preset", "veryfast", "-movflags", "+faststart"],
            )
            self._gen.send(None)
        elif (width, height) != self.size:
            raise ValueError(f"frame {self.frames} is {width}x{height}, not {self.size}")
        self._gen.send(np.ascontiguousarray(frame, dtype=np.uint8).tobytes())
        self.frames += 1

    def close(self) -> None:
        """Finish the file (ffmpeg writes the index and exits)."""
        if self._gen is not None:
            gen, self._gen = self._gen, None
            gen.close()

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
