"""Plug-ins by name: one entry-point group read into ``{name: EntryPoint}``.

Rollout kinds (:mod:`.kind_registry`) and sandboxes (:mod:`ale_robotics.sandboxes.registry`)
are both found this way; the same name declared twice by two distributions with different
targets is refused, naming both, rather than one silently winning.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["entry_points_by_name"]


def entry_points_by_name(group: str, what: str) -> dict[str, metadata.EntryPoint]:
    """The entry points of ``group`` by name; ``what`` names one for the error message
    (``"rollout kind"``, ``"sandbox"``). Raises ValueError for a name registered twice."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=group):
        seen = found.get(ep.name)
        if seen is not None and seen.value != ep.value:
            raise ValueError(
                f"{what} {ep.name!r} is registered twice, as {seen.value} and as {ep.value}: "
                "uninstall one of the distributions that declare it"
            )
        found[ep.name] = ep
    return found
