"""The installed sandboxes, found by name through the entry-point group ``ale_robotics.sandboxes``.

Each is one line of its distribution's metadata, as rollout kinds are
(:mod:`ale_robotics.model.kind_registry`); ours in ``pyproject.toml``::

    [project.entry-points."ale_robotics.sandboxes"]
    bwrap = "ale_robotics.sandboxes.bwrap:BwrapSandbox"

The name is what ``--sandbox`` (and an eval set's ``sandbox:``) says; the value a
:class:`~.base.Sandbox` subclass. :data:`AUTO` is no sandbox but a choice: the available
one of the lowest :attr:`~.base.Sandbox.auto_rank`. This module is the only place that
knows sandboxes by name: the harness asks it for one and then asks the sandbox.

What cannot be had says what to install: an unknown name lists the installed ones and
the plug-in mechanism; a registered sandbox whose module does not import (an optional
extra not installed) names ``pip install 'DIST[EXTRA]'``; a sandbox that imports but
cannot start here says why in its own words (:meth:`~.base.Sandbox.unavailable`:
``apt-get install bubblewrap``, ``make docker-deps``...).
"""

from __future__ import annotations

import difflib
import functools
import threading
from importlib import metadata

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.model.entry_points import entry_points_by_name
from ale_robotics.sandboxes.base import Sandbox
from ale_robotics.sandboxes.errors import SandboxError

__all__ = [
    "AUTO",
    "ENTRY_POINT_GROUP",
    "check_sandbox_name",
    "clear_cache",
    "resolve_sandbox",
    "sandbox_choices",
    "sandbox_class",
    "sandbox_names",
    "sandboxes_taking",
    "takes_option",
]

ENTRY_POINT_GROUP = "ale_robotics.sandboxes"
AUTO = "auto"
"""The choice of the best sandbox that can start here (never the docker one)."""

_CLASSES: dict[str, type[Sandbox]] = {}
_LOCK = threading.Lock()


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name, read once per process (or per :func:`clear_cache`)."""
    return entry_points_by_name(ENTRY_POINT_GROUP, "sandbox")


def sandbox_names() -> list[str]:
    """The registered sandboxes' names, sorted; imports none of them."""
    return sorted(_entry_points())


def sandbox_choices() -> list[str]:
    """What ``--sandbox`` accepts: :data:`AUTO` and every registered name."""
    return [AUTO, *sandbox_names()]


def _unknown(name: str) -> str:
    names = sandbox_names()
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = ", ".join(repr(n) for n in sandbox_choices())
    return (
        f"not a sandbox{hint}: use {listed}; another one is a plug-in (install the "
        f"distribution that registers it in the entry-point group {ENTRY_POINT_GROUP!r})"
    )


def check_sandbox_name(name: str) -> str:
    """``name`` if ``--sandbox`` accepts it; else ``ValueError`` saying what it accepts."""
    if name != AUTO and name not in _entry_points():
        raise ValueError(_unknown(name))
    return name


def sandbox_class(name: str) -> type[Sandbox]:
    """The sandbox registered as ``name``, imported on first use.

    :class:`InvalidArgumentError` for a name no distribution registers;
    :class:`SandboxError` naming what to install when its module does not import.
    """
    cls = _CLASSES.get(name)
    if cls is not None:
        return cls
    ep = _entry_points().get(name)
    if ep is None:
        raise InvalidArgumentError(f"--sandbox {name!r}: {_unknown(name)}")
    try:
        obj = ep.load()
    except ImportError as exc:
        raise SandboxError(
            f"the {name!r} sandbox cannot be loaded ({exc}): {_install_hint(ep, name)}"
        ) from None
    if not (isinstance(obj, type) and issubclass(obj, Sandbox)):
        raise TypeError(f"entry point {name} = {ep.value} of {ENTRY_POINT_GROUP!r} is no Sandbox")
    if obj.name != name:
        raise ValueError(
            f"entry point {name} = {ep.value} of {ENTRY_POINT_GROUP!r} is the sandbox "
            f"{obj.name!r}: the entry point's name must be the sandbox's name"
        )
    with _LOCK:
        return _CLASSES.setdefault(name, obj)


def _install_hint(ep: metadata.EntryPoint, name: str) -> str:
    """``pip install 'DIST[NAME]'`` when the distribution has an extra of that name."""
    dist = ep.dist
    if dist is None:
        return "reinstall the distribution that registers it"
    extras = dist.metadata.get_all("Provides-Extra") or []
    if name in extras:
        return f"install its extra: pip install '{dist.name}[{name}]'"
    return f"reinstall {dist.name}"


def _auto_candidates() -> list[type[Sandbox]]:
    classes = [sandbox_class(n) for n in sandbox_names()]
    ranked = [c for c in classes if c.auto_rank is not None]
    return sorted(ranked, key=lambda c: (c.auto_rank, c.name))


def resolve_sandbox(requested: str, *, check: bool = True, **options: object) -> Sandbox:
    """The sandbox a run asked for, made with the options it takes from ``options``.

    :data:`AUTO` is the available candidate of the lowest rank. A sandbox asked for by
    name must be able to start here (:class:`SandboxError` saying what to install)
    unless ``check`` is False (for a pre-run look at what it would show).
    """
    if requested == AUTO:
        found = [c for c in _auto_candidates() if c.unavailable() is None][:1]
        if not found:
            raise SandboxError(
                f"no sandbox can start here for --sandbox {AUTO} (registered: "
                f"{', '.join(sandbox_names()) or 'none'}): reinstall ale-robotics"
            )
        cls = found[0]
    else:
        cls = sandbox_class(requested)
        reason = cls.unavailable() if check else None
        if reason is not None:
            raise SandboxError(reason)
    return cls(**{k: v for k, v in options.items() if k in cls.options})


def takes_option(requested: str, option: str) -> bool:
    """Does the sandbox ``requested`` take the option ``option`` (:attr:`~.base.Sandbox.options`)?
    For :data:`AUTO`: does every candidate it could pick take it."""
    if requested == AUTO:
        return all(option in c.options for c in _auto_candidates())
    return option in sandbox_class(requested).options


def sandboxes_taking(option: str) -> list[str]:
    """The names of the sandboxes that take ``option``."""
    return [n for n in sandbox_names() if option in sandbox_class(n).options]


def clear_cache() -> None:
    """Forget the entry points read and the classes loaded (tests that register one)."""
    with _LOCK:
        _entry_points.cache_clear()
        _CLASSES.clear()
