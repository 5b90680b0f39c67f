"""The overlay: a directory that puts this process's ``ale_robotics`` on an engine's path.

It holds only ``ale_robotics`` (a symlink to the package this process runs, source tree or
site-packages alike) and a copy of its distribution metadata (``METADATA``,
``entry_points.txt``: rollout kinds and engines are found by entry points in the engine
too). Put first on an engine interpreter's ``sys.path`` (a worker's, the warm-up's, the
device probe's), it makes the kind's code there the very module set the evaluator runs,
while every other import comes from the engine's own site-packages.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import ale_robotics
from ale_robotics.engines.home import engines_home

__all__ = ["overlay", "with_overlay"]


@functools.cache
def _contents() -> tuple[Path, str, dict[str, str], str]:
    """This process's package directory, its distribution's version and metadata files,
    and their digest (what names the overlay), read once."""
    package = Path(ale_robotics.__file__).resolve().parent
    dist = metadata.distribution("ale-robotics")
    files = {name: dist.read_text(name) or "" for name in ("METADATA", "entry_points.txt")}
    digest = hashlib.sha256(
        "\0".join([str(package), *(f"{k}\0{v}" for k, v in sorted(files.items()))]).encode()
    ).hexdigest()[:16]
    return package, dist.version, files, digest


def overlay() -> Path:
    """The overlay directory of this process's ``ale_robotics`` (see the module docstring),
    under the engines' home, made by the first process that needs it and shared by every
    process with the same package and metadata (named by their digest)."""
    package, version, files, digest = _contents()
    target = engines_home() / "overlays" / digest
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".overlay-", dir=target.parent))
    (staging / "ale_robotics").symlink_to(package, target_is_directory=True)
    info = staging / f"ale_robotics-{version}.dist-info"
    info.mkdir()
    for name, text in files.items():
        (info / name).write_text(text)
    try:
        os.rename(staging, target)
    except OSError:  # another process made it meanwhile: theirs is the same
        shutil.rmtree(staging, ignore_errors=True)
    return target


def with_overlay(source: str) -> str:
    """``source`` preceded by putting the overlay first on ``sys.path`` (for ``python -I -c``:
    code run in an engine that imports ``ale_robotics``)."""
    return f"import sys\nsys.path.insert(0, {str(overlay())!r})\n{source}"
