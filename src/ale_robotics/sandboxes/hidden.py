"""Modules the agent must not import, as what a sandbox covers: where they are installed.

A task names modules its agent must not import (``metaworld.policies``; the simulator
of a task whose simulator runs only in the evaluator, see
:mod:`ale_robotics.harness.agent.hidden_modules`). A sandbox covers each where it is
installed: a package directory with a read-only empty tmpfs holding only
:data:`IMPORT_BLOCKER` as its ``__init__.py``, a module file with that file. The host's
install paths are found here (:func:`install_paths`) without importing anything; the
docker sandbox asks its image's own Python the same question.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

__all__ = ["IMPORT_BLOCKER", "install_paths", "module_path"]

IMPORT_BLOCKER = Path(__file__).with_name("_import_blocker.py")
"""Bound over a hidden module: importing it raises ImportError saying why."""


def module_path(name: str) -> Path | None:
    """Where module ``name`` is installed: a package's directory or a module's ``.py`` file.

    None when it is not installed (nothing to hide). Only the top-level package
    is looked up through the import system (``find_spec`` of a top-level name
    imports nothing); the rest of the dotted name is followed on disk.
    """
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        return None
    if not spec.submodule_search_locations:
        return Path(spec.origin) if not rest and spec.origin else None
    bases = [Path(p) for p in spec.submodule_search_locations]
    if not rest:
        return bases[0]
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        found: Path | None = None
        for base in bases:
            if (base / part).is_dir():
                found = base / part
                break
            if last and (base / f"{part}.py").is_file():
                return base / f"{part}.py"
        if found is None:
            return None
        bases = [found]
    return bases[0]


def install_paths(names: Iterable[str]) -> list[Path]:
    """The resolved install paths of the modules ``names`` that exist here.

    A path inside another one of the list is left out: hiding the package above it
    already hides it (``metaworld.policies`` once ``metaworld`` itself is hidden).
    """
    found: list[Path] = []
    for name in names:
        path = module_path(name)
        if path is not None and path.resolve() not in found:
            found.append(path.resolve())
    return [p for p in found if not any(q in p.parents for q in found)]
