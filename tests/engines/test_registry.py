"""The engine registry: engines by name through entry points, and the kinds that name them."""

from __future__ import annotations

import pytest

from ale_robotics.engines import engine_names, engine_of_kind, get_engine, kinds_of
from ale_robotics.engines.errors import EngineNotInstalled, EngineUnavailable, install_command
from ale_robotics.model.kind_registry import get_kind, kind_names


def test_the_bundled_engine_is_registered_and_named_by_its_kind() -> None:
    assert "mujoco-warp" in engine_names()
    engine = get_engine("mujoco-warp")
    assert engine.name == "mujoco-warp" and get_engine("mujoco-warp") is engine
    assert engine_of_kind("mujoco_warp") is engine
    assert kinds_of("mujoco-warp") == ["mujoco_warp"]


@pytest.mark.parametrize("kind", ["gymnasium", "mujoco_rollout", "replay", "planner", "mjx"])
def test_the_evaluators_own_kinds_have_no_engine(kind: str) -> None:
    assert engine_of_kind(kind) is None


def test_every_kinds_engine_is_registered() -> None:
    for name in kind_names():
        engine = get_kind(name).engine
        if engine is not None:
            assert get_engine(engine).name == engine


def test_an_unknown_engine_lists_the_registered_ones_and_the_closest() -> None:
    with pytest.raises(EngineUnavailable) as info:
        get_engine("mujoco-wrap")
    message = info.value.message
    assert "did you mean 'mujoco-warp'?" in message and "engines list" in message


def test_not_installed_names_the_command_that_installs_it() -> None:
    exc = EngineNotInstalled("mujoco-warp", "td3-inverted-pendulum-warp-v1")
    assert install_command("mujoco-warp") in exc.message
    assert "td3-inverted-pendulum-warp-v1" in exc.message
    assert isinstance(exc, EngineUnavailable)
