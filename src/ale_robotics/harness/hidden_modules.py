"""What a task's agent must not be able to import, as paths the sandbox blocks.

Some simulator packages ship solutions to their own tasks: Meta-World bundles
scripted expert policies (``metaworld.policies``) for every task. An agent that
imports them would be scored on Meta-World's controller, not on its own. A task
lists such modules in its config (``env.agent_hidden_modules``, covered by the
config hash like the rest of its protocol); :func:`sandbox_hidden_paths` finds
where they are installed, and the sandbox (``bwrap_command(block_imports=...)``)
lays an empty tmpfs over each package with an ``__init__.py`` that raises
``ImportError``, so the files cannot be imported, read or listed inside.

The modules are located without importing them or the packages above them:
importing a simulator in the harness would be slow and would run its code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ale_robotics.tasks.spec import TaskSpec

__all__ = ["module_path", "sandbox_hidden_paths"]


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


def sandbox_hidden_paths(task: TaskSpec) -> list[Path]:
    """The resolved install paths of ``task``'s ``env.agent_hidden_modules`` that exist here."""
    out: list[Path] = []
    for name in task.env.agent_hidden_modules:
        path = module_path(name)
        if path is not None and path.resolve() not in out:
            out.append(path.resolve())
    return out
