"""What a bubblewrap sandbox shows of the host: its tree mounts in order, and one visibility rule.

The sandbox binds a few host trees (the workspace and the Python environment
read-only, the run's scratch and submission directories read-write) and covers the
directories the agent must not see (every run directory, runs root and state dir
recorded by the harness) with an empty tmpfs. Mounts nest, and a later mount at or
below a path decides what is there, so the order is fixed here, once, for two users
that must agree:

* :func:`ale_robotics.sandboxes.bwrap.command.bwrap_command` mounts them in this order;
* :mod:`ale_robotics.sandboxes.live` keeps the plan of every running sandbox,
  so that the harness can refuse to create a run directory that one of them would
  see (a bind is live: a directory made under it later shows up inside).

The rule (:func:`shows`): the **innermost** mount at or above a host path decides;
none means the path does not exist inside. Mounts go shallowest first (a mount is
always made after the ones that enclose it); at one path a read-only tree comes
first, then a cover, then a writable bind. A cover enclosed only by another cover
adds nothing and is left out; a tree of the plan that lies inside a cover is bound
again after it (the Python environment inside a hidden directory stays usable).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Mount", "MountKind", "plan_mounts", "shows"]

MountKind = Literal["ro", "hide", "rw"]
_ORDER: dict[MountKind, int] = {"ro": 0, "hide": 1, "rw": 2}


@dataclass(frozen=True)
class Mount:
    """One tree mount of the sandbox: ``dest`` inside, ``src`` on the host.

    ``src`` is the resolved host path (what visibility is judged on); ``dest`` is where
    the sandbox shows it (the same path, unless the caller named it through a symlink).
    A cover (``hide``) records the device and inode of the directory it covered: a
    directory removed and made again on the host is no longer under that cover (the
    kernel detaches a mount whose mount point is deleted in another namespace).
    """

    kind: MountKind
    src: str
    dest: str
    dev: int = 0
    ino: int = 0

    def still_covers(self) -> bool:
        """For a cover: is its directory still the one that was covered?"""
        try:
            st = os.stat(self.src)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (self.dev, self.ino)


def _depth(path: str) -> int:
    return path.rstrip(os.sep).count(os.sep)


def _inside(path: str, tree: str) -> bool:
    """``path`` is ``tree`` or below it (both absolute and normalized)."""
    return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)


def plan_mounts(
    ro: Iterable[os.PathLike[str] | str],
    hide: Iterable[os.PathLike[str] | str],
    rw: Iterable[os.PathLike[str] | str],
) -> list[Mount]:
    """The tree mounts in the order to make them (see the module docstring).

    Covers of paths that do not exist (nothing to hide, nowhere to mount) are left
    out; the caller checks that the other paths exist.
    """
    mounts: list[Mount] = []
    for kind, paths in (("ro", ro), ("hide", hide), ("rw", rw)):
        for p in paths:
            dest = os.path.abspath(os.fspath(p))
            src = os.path.realpath(dest)
            if kind == "hide":
                try:
                    st = os.stat(src)
                except OSError:
                    continue
                mounts.append(Mount("hide", src, dest, st.st_dev, st.st_ino))
            else:
                mounts.append(Mount(kind, src, dest))  # type: ignore[arg-type]
    # Python's sort is stable: equal keys keep ro, hide, rw order from above.
    mounts.sort(key=lambda m: (_depth(m.dest), _ORDER[m.kind]))
    out: list[Mount] = []
    seen: set[tuple[str, str]] = set()
    for m in mounts:
        if (m.kind, m.dest) in seen:
            continue
        enclosing = _innermost(out, m.dest, strict=True)
        if m.kind == "hide" and enclosing is not None and enclosing.kind == "hide":
            continue  # an empty tmpfs inside an empty tmpfs: nothing more is hidden
        seen.add((m.kind, m.dest))
        out.append(m)
    return out


def _innermost(mounts: Sequence[Mount], dest: str, *, strict: bool = False) -> Mount | None:
    """The last-made mount at or above ``dest`` (strictly above with ``strict``)."""
    found: Mount | None = None
    for m in mounts:
        if (strict and m.dest == dest) or not _inside(dest, m.dest):
            continue
        if found is None or _depth(m.dest) >= _depth(found.dest):
            found = m
    return found


def shows(mounts: Sequence[Mount], path: os.PathLike[str] | str) -> bool:
    """Does a sandbox with these mounts show the host path ``path``?

    Judged on host paths (``src``), by the innermost mount at or above it; a cover
    whose directory was removed and made again covers nothing any more. A symlink
    is judged where it points.
    """
    real = os.path.realpath(os.fspath(path))
    found: Mount | None = None
    for m in mounts:
        if m.kind == "hide" and not m.still_covers():
            continue
        if _inside(real, m.src) and (found is None or _depth(m.src) >= _depth(found.src)):
            found = m
    return found is not None and found.kind != "hide"
