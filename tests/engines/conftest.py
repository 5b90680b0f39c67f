"""Fixtures of the engine tests: the tiny plug-in engine registered, in a home of its own."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# As in tests/evaluator/execution: only tests/ is on sys.path, so this directory goes there
# too, for the test modules' ``import engine_tiny``.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from engine_tiny import tiny_site

from ale_robotics.engines import registry as engine_registry
from ale_robotics.model import kind_registry


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tiny plug-in on ``sys.path`` and an engines home of the module's own
    (``ALE_ENGINES_DIR``, as long as the module's tests run); everything undone after."""
    site = tiny_site(tmp_path_factory.mktemp("tiny-site"))
    home = tmp_path_factory.mktemp("engines-home")
    old = os.environ.get("ALE_ENGINES_DIR")
    os.environ["ALE_ENGINES_DIR"] = str(home)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    kind_registry.clear_cache()
    engine_registry.clear_cache()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        importlib.invalidate_caches()
        kind_registry.clear_cache()
        engine_registry.clear_cache()
        if old is None:
            os.environ.pop("ALE_ENGINES_DIR", None)
        else:
            os.environ["ALE_ENGINES_DIR"] = old
