"""The installed rollout kinds, found through the entry-point group ``ale_robotics.rollout_kinds``.

Each kind is registered by one line of its distribution's metadata, e.g. in
``pyproject.toml``::

    [project.entry-points."ale_robotics.rollout_kinds"]
    replay = "ale_robotics.rollouts.replay:ReplayKind"

The entry point's name is the kind's name (what a task config writes in
``eval.backend``) and its value a :class:`~ale_robotics.model.rollout_kind.RolloutKind`
subclass (instantiated once, without arguments) or instance. Our own kinds are
registered the same way as a third party's, so that adding one touches its folder
and that line only, never a list in the evaluator.

Why entry points rather than imports: the task model validates every config
against :func:`kind_names` and calls its kind's checks, and the kinds import the
task model, so the registry must import no kind (this module imports nothing of
ours but the interface, which imports nothing at all). :func:`kind_names` reads
the names from the installed metadata without importing any kind; :func:`get_kind`
imports one kind's module the first time it is asked for, and keeps the instance
for the life of the process (a worker asks once per shard).
"""

from __future__ import annotations

import functools
import threading
from importlib import metadata

from ale_robotics.model.entry_points import entry_points_by_name
from ale_robotics.model.rollout_kind import RolloutKind

__all__ = ["ENTRY_POINT_GROUP", "clear_cache", "get_kind", "kind_names"]

ENTRY_POINT_GROUP = "ale_robotics.rollout_kinds"

_KINDS: dict[str, RolloutKind] = {}
_LOCK = threading.Lock()


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name, read once per process (or per :func:`clear_cache`)."""
    return entry_points_by_name(ENTRY_POINT_GROUP, "rollout kind")


def kind_names() -> list[str]:
    """The registered kinds' names, sorted; imports no kind."""
    return sorted(_entry_points())


def get_kind(name: str) -> RolloutKind:
    """The kind registered as ``name``, loaded on first use; ``ValueError`` when unknown."""
    kind = _KINDS.get(name)
    if kind is not None:
        return kind
    eps = _entry_points()
    ep = eps.get(name)
    if ep is None:
        registered = ", ".join(repr(n) for n in sorted(eps)) or "none"
        raise ValueError(
            f"unknown rollout kind {name!r}; registered kinds: {registered} (entry points of "
            f"the group {ENTRY_POINT_GROUP!r}: install the distribution that provides it, or "
            "reinstall ale-robotics if none are listed)"
        )
    obj = ep.load()
    loaded = obj() if isinstance(obj, type) and issubclass(obj, RolloutKind) else obj
    if not isinstance(loaded, RolloutKind):
        raise TypeError(
            f"entry point {name} = {ep.value} of {ENTRY_POINT_GROUP!r} is {obj!r}, "
            "not a RolloutKind subclass or instance"
        )
    if loaded.name != name:
        raise ValueError(
            f"entry point {name} = {ep.value} of {ENTRY_POINT_GROUP!r} gives a kind named "
            f"{loaded.name!r}: the entry point's name must be the kind's name"
        )
    with _LOCK:
        return _KINDS.setdefault(name, loaded)


def clear_cache() -> None:
    """Forget the entry points read and the kinds loaded (tests that register a kind)."""
    with _LOCK:
        _entry_points.cache_clear()
        _KINDS.clear()
