"""The ``ale`` sandbox's configuration: the run options each sample's run gets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.run import run_task
from ale_robotics.inspect.channel import ToolboxAccess
from ale_robotics.inspect.sample_run import inspect_label
from ale_robotics.inspect.sandbox import AleSandboxConfig


def test_settings_become_the_runs_options_with_the_toolbox_as_its_agent(tmp_path: Path) -> None:
    cfg = AleSandboxConfig(
        runs_root=str(tmp_path), settings={"sandbox": "bwrap", "episodes": 2, "budget_s": 60}
    )
    opts = cfg.run_options("td3-inverted-pendulum-v2")
    assert opts.agent_cmd == f"{sys.executable} -m ale_robotics.inspect.toolbox"
    assert (opts.sandbox, opts.episodes, opts.budget_s) == ("bwrap", 2, 60.0)
    assert opts.runs_root == tmp_path and opts.label is None


def test_in_a_container_the_toolbox_runs_on_the_images_python() -> None:
    cfg = AleSandboxConfig(settings={"sandbox": "docker"})
    assert cfg.run_options("td3-inverted-pendulum-v2").agent_cmd == (
        "python -m ale_robotics.inspect.toolbox"
    )


def test_a_config_is_hashable_and_equal_by_value() -> None:
    """Inspect keeps sandbox specs in sets; settings is a dict."""
    a = AleSandboxConfig(settings={"sandbox": "bwrap", "workers": 2})
    b = AleSandboxConfig(settings={"workers": 2, "sandbox": "bwrap"})
    assert a == b and len({a, AleSandboxConfig(settings={"workers": 3})}) == 2


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"sandbox": "nonesuch"}, "nonesuch"),
        ({"episodes": 2, "evaluator": "unix:///tmp/x.sock"}, "--episodes"),
        ({"budget_s": -1}, "budget"),
    ],
)
def test_settings_that_cannot_work_are_refused_saying_why(
    settings: dict[str, object], says: str
) -> None:
    with pytest.raises((InvalidArgumentError, ValueError), match=says):
        AleSandboxConfig(settings=settings).run_options("td3-inverted-pendulum-v2")


def test_an_inspect_driven_run_has_no_model_gateway(tmp_path: Path) -> None:
    cfg = AleSandboxConfig(
        runs_root=str(tmp_path),
        settings={"model_upstream": "http://127.0.0.1:9/v1", "models": ["m"], "sandbox": "none"},
    )
    opts = cfg.run_options("td3-inverted-pendulum-v2")
    with pytest.raises(InvalidArgumentError, match="leave --model-upstream out"):
        run_task(opts, agent_access=ToolboxAccess(socket_dir=tmp_path))
    assert not any(tmp_path.iterdir())  # refused before anything was made


@pytest.mark.parametrize(
    ("model", "label"),
    [
        ("openai/gpt-5", "openai-gpt-5"),
        ("mockllm/model", "mockllm-model"),
        ("anthropic/claude sonnet:4.5", "anthropic-claude-sonnet-4.5"),
        ("///", "model"),
        ("x" * 100, "x" * 64),
    ],
)
def test_the_run_label_is_the_models_name(model: str, label: str) -> None:
    assert inspect_label(model) == label


def test_a_label_given_names_the_runs_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    cfg = AleSandboxConfig(label="react-gpt5", settings={"sandbox": "bwrap"})
    assert cfg.run_options("td3-inverted-pendulum-v2").label == "react-gpt5"
    with pytest.raises(InvalidArgumentError, match="--label"):
        AleSandboxConfig(label="no spaces").run_options("td3-inverted-pendulum-v2")
