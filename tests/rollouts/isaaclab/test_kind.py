"""The ``isaaclab`` kind as the evaluator sees it (no engine needed): its rules, its spaces,
its engine's declaration, and the offline guard its workers run under."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from ale_robotics.engines import engine_of_kind, get_engine
from ale_robotics.engines.build import parse_pins
from ale_robotics.engines.home import constraints_path
from ale_robotics.envs.make import make_env
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.isaaclab import offline
from ale_robotics.tasks import TaskSpec, default_registry
from ale_robotics.tasks.manifest import load_manifest

TASK = "isaaclab-cartpole-direct-v1"


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(default_registry().entry(TASK).raw)
    doc.update(changes)
    return doc


def test_the_bundled_task_runs_in_the_isaaclab_engine_and_is_measurement_only() -> None:
    task = default_registry().get(TASK)
    kind = get_kind(task.eval.rollout)
    assert kind.name == "isaaclab" and kind.engine == "isaaclab"
    engine = engine_of_kind(kind.name)
    assert engine is not None and engine.python == "3.12" and engine.agent_trains_with
    entry = load_manifest().tasks[TASK]
    assert entry.target is None  # no published value for this variant


def test_the_spaces_env_has_isaac_labs_spaces_and_cannot_be_stepped() -> None:
    env = make_env(default_registry().get(TASK).env)
    assert env.observation_space.shape == (4,) and env.action_space.shape == (1,)
    with pytest.raises(NotImplementedError, match="isaaclab engine"):
        env.reset(seed=1)


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"mode": "interactive"}, "runs batch tasks only"),
        ({"env": {"gym_id": "CartPole-v1", "kwargs": {}, "max_episode_steps": 300}}, "gym_id"),
        (
            {
                "env": {
                    "gym_id": "ale_robotics.rollouts.isaaclab.spaces:IsaacLab-v0",
                    "kwargs": {"task": "Isaac-Ant-Direct"},
                    "max_episode_steps": 300,
                }
            },
            "runs the Isaac Lab tasks",
        ),
        ({"training": {"simulator": "evaluator"}}, "trains in the agent's sandbox"),
    ],
)
def test_tasks_it_cannot_run_are_refused(changes: dict[str, Any], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        TaskSpec.model_validate(_doc(**changes))


def test_the_engine_pins_every_distribution_and_omits_only_what_it_names() -> None:
    engine = get_engine("isaaclab")
    pins = parse_pins(constraints_path(engine).read_text())
    assert pins["isaaclab"] == "3.0.0" and pins["rsl-rl-lib"] == "5.5.1"
    assert not engine.omitted_requirements & set(pins)  # nothing both pinned and omitted
    assert {"open3d", "transformers", "triton", "torchvision"} <= engine.omitted_requirements


class _Passed(Exception):
    pass


def test_the_offline_guard_refuses_and_records_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the real connect replaced first, nothing here can reach a network even if the
    guard let a call through: it would raise _Passed instead."""

    def passed(self: socket.socket, address: Any) -> None:
        raise _Passed(address)

    monkeypatch.setattr(socket.socket, "connect", passed)
    monkeypatch.setattr(socket.socket, "connect_ex", passed)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [])
    monkeypatch.setattr(offline, "_TRIED", [])
    monkeypatch.delenv("ISAACSIM_ASSET_ROOT", raising=False)
    offline.offline()
    with socket.socket() as s, pytest.raises(OSError, match="network refused"):
        s.connect(("192.0.2.1", 80))
    with pytest.raises(OSError, match="network refused"):
        socket.getaddrinfo("omniverse-content-production.s3-us-west-2.amazonaws.com", 443)
    with socket.socket() as s, pytest.raises(_Passed):
        s.connect(("127.0.0.1", 9))  # this host's own: the worker protocol may use it
    assert socket.getaddrinfo("localhost", 80) == []
    tried = offline.network_attempts()
    assert len(tried) == 2 and "192.0.2.1" in tried[0] and "amazonaws" in tried[1]
    import os

    assert os.environ["ISAACSIM_ASSET_ROOT"] == str(offline.ASSETS)
    assert (offline.ASSETS / "Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd").is_file()
