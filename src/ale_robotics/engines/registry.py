"""The engines, found by name through the entry-point group ``ale_robotics.engines``.

Registered like rollout kinds and sandboxes, one line each in ``pyproject.toml``::

    [project.entry-points."ale_robotics.engines"]
    mujoco-warp = "ale_robotics.rollouts.mujoco_warp.engine:MujocoWarpEngine"

The value is an :class:`~.base.Engine` subclass. An engine's class lives with the kind
that runs in it (the kind's folder and its two entry points are all a new engine adds),
and is loaded through the entry point, so nothing here imports a kind.
"""

from __future__ import annotations

import difflib
import functools
import threading
from importlib import metadata

from ale_robotics.engines.base import Engine
from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.model.entry_points import entry_points_by_name
from ale_robotics.model.kind_registry import get_kind

__all__ = [
    "ENTRY_POINT_GROUP",
    "clear_cache",
    "engine_names",
    "engine_of_kind",
    "get_engine",
    "kinds_of",
]

ENTRY_POINT_GROUP = "ale_robotics.engines"

_ENGINES: dict[str, Engine] = {}
_LOCK = threading.Lock()


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return entry_points_by_name(ENTRY_POINT_GROUP, "engine")


def engine_names() -> list[str]:
    """The registered engines' names, sorted; imports none of them."""
    return sorted(_entry_points())


def get_engine(name: str) -> Engine:
    """The engine registered as ``name``; :class:`EngineUnavailable` (saying which exist)
    for an unknown one."""
    engine = _ENGINES.get(name)
    if engine is not None:
        return engine
    ep = _entry_points().get(name)
    if ep is None:
        names = engine_names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listed = ", ".join(repr(n) for n in names) or "none"
        raise EngineUnavailable(
            f"no engine {name!r}{hint}: the registered engines are {listed} "
            f"('ale-robotics engines list'; others come from the entry-point group "
            f"{ENTRY_POINT_GROUP!r})"
        )
    obj = ep.load()
    if not (isinstance(obj, type) and issubclass(obj, Engine)):
        raise TypeError(f"entry point {name} = {ep.value} of {ENTRY_POINT_GROUP!r} is no Engine")
    if obj.name != name:
        raise ValueError(
            f"entry point {name} = {ep.value} of {ENTRY_POINT_GROUP!r} is the engine "
            f"{obj.name!r}: the entry point's name must be the engine's name"
        )
    with _LOCK:
        return _ENGINES.setdefault(name, obj())


def engine_of_kind(kind: str) -> Engine | None:
    """The engine the rollout kind ``kind`` runs in, or None for the evaluator's own
    environment; ``ValueError`` for an unknown kind."""
    name = get_kind(kind).engine
    return None if name is None else get_engine(name)


def kinds_of(engine: str) -> list[str]:
    """The registered rollout kinds that run in ``engine`` (loads every kind's module,
    which the kinds keep cheap)."""
    from ale_robotics.model.kind_registry import kind_names

    return [k for k in kind_names() if get_kind(k).engine == engine]


def clear_cache() -> None:
    """Forget the entry points read and the engines loaded (tests that register one)."""
    with _LOCK:
        _entry_points.cache_clear()
        _ENGINES.clear()
