"""Package exports loaded on first use (PEP 562), for packages whose ``__init__`` must stay
cheap to import: the agent's SDK, the harness's start-up and a task config's check import
them, and what their names are defined with (the evaluator, numpy, MuJoCo) is not needed
until a name is used."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``where`` is imported from
    its module (``where[name]``, a full module name) the first time it is looked up, then
    kept in the package's namespace, so the next lookup is a plain attribute."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
