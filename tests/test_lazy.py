"""The packages with lazy exports (ale_robotics.lazy) give every name of their __all__."""

from __future__ import annotations

import importlib

import pytest

LAZY_PACKAGES = [
    "ale_robotics.evaluator",
    "ale_robotics.harness",
    "ale_robotics.tasks",
    "ale_robotics.rollouts.mujoco_rollout",
]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_exported_name_loads_and_is_listed(name: str) -> None:
    package = importlib.import_module(name)
    assert set(dir(package)) >= set(package.__all__)
    for export in package.__all__:
        value = getattr(package, export)
        assert vars(package)[export] is value  # kept: the next lookup is a plain attribute
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'NoSuchName'"):
        package.NoSuchName  # noqa: B018
