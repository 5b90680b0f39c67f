"""Where engine environments live, and the key that names one build of an engine.

Each build is a directory ``<home>/<engine>/<key>/`` holding the environment
(``venv/``), the caches its workers fill (``cache/``) and, written last, ``engine.json``
(:class:`~.record.InstalledEngine`): a build without it is unfinished and is built again.
The key is a digest of what decides the environment's contents (the engine's name, its
Python's ``MAJOR.MINOR`` and the bytes of its constraints file), so changing a pin makes a
new build beside the old one instead of mutating an environment workers may be using.

``home`` is ``$ALE_ENGINES_DIR``, else ``$XDG_CACHE_HOME/ale-robotics/engines`` (default
``~/.cache/ale-robotics/engines``): a cache, shared by every checkout of the same user.
The constraints files are ``constraints/engine-*.txt`` of the source tree, or of
``$ALE_ENGINE_CONSTRAINTS`` where the package is installed without it (an image).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import ale_robotics
from ale_robotics.engines.base import Engine
from ale_robotics.engines.errors import EngineUnavailable

__all__ = ["build_dir", "constraints_dir", "constraints_path", "engine_key", "engines_home"]

KEY_FORMAT = 1
"""Part of every key: bumped when what a build holds changes for all engines at once."""


def engines_home() -> Path:
    """The directory of every engine build (see the module docstring)."""
    explicit = os.environ.get("ALE_ENGINES_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ale-robotics" / "engines"


def constraints_dir() -> Path:
    """``$ALE_ENGINE_CONSTRAINTS``, else the source tree's ``constraints/``."""
    explicit = os.environ.get("ALE_ENGINE_CONSTRAINTS")
    if explicit:
        return Path(explicit)
    return Path(ale_robotics.__file__).resolve().parents[2] / "constraints"


def constraints_path(engine: Engine) -> Path:
    """The engine's pins; :class:`EngineUnavailable` where the file is not there."""
    path = constraints_dir() / engine.constraints
    if not path.is_file():
        raise EngineUnavailable(
            f"the engine {engine.name!r} is pinned by {engine.constraints}, not found in "
            f"{path.parent} (a source checkout has it in constraints/; elsewhere set "
            "ALE_ENGINE_CONSTRAINTS to a directory holding it)"
        )
    return path


def engine_key(engine: Engine) -> str:
    """The digest that names this engine's build (see the module docstring)."""
    doc: dict[str, object] = {
        "format": KEY_FORMAT,
        "engine": engine.name,
        "python": engine.python,
        "constraints": hashlib.sha256(constraints_path(engine).read_bytes()).hexdigest(),
    }
    if engine.system_packages or engine.interpreter or engine.system_site_packages:
        doc["system"] = {
            "packages": sorted(engine.system_packages),
            "interpreter": engine.interpreter,
            "site_packages": engine.system_site_packages,
        }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def build_dir(engine: Engine) -> Path:
    """``<home>/<engine>/<key>``: where this engine's current build is (or goes)."""
    return engines_home() / engine.name / engine_key(engine)
