"""The ``ros`` kind's rules and the graph it writes, without running one."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import ros_support

from ale_robotics.engines import engine_of_kind
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.ros.graph import GraphSetup, launch_file, prepare
from ale_robotics.rollouts.ros.nodes.wire import EpisodeParams
from ale_robotics.tasks import TaskSpec, default_registry

KIND = get_kind("ros")


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(default_registry().entry(ros_support.TASK).raw)
    for path, value in changes.items():
        node = doc
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return doc


def test_runs_in_the_ros_engine_one_worker_at_a_time() -> None:
    engine = engine_of_kind("ros")
    assert engine is not None and engine.name == "ros"
    assert engine.interpreter == "/usr/bin/python3" and engine.system_site_packages
    assert {"ros-core", "python3-rospy", "python3-roslaunch"} <= set(engine.system_packages)
    assert KIND.worker_needs is not None and KIND.worker_needs.max_workers == 1
    assert KIND.video_source is None  # a replay without the graph's timing is another episode


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"mode": "interactive", "session": {"max_envs_per_session": 1}}, "batch tasks only"),
        ({"simulator.name": "pybullet"}, "MuJoCo"),
        ({"policy": None}, "policy"),
    ],
)
def test_refuses_a_task_it_cannot_run(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TaskSpec.model_validate(_doc(**changes))


def test_the_launch_file_needs_the_sim_and_recorder_not_the_policy(tmp_path: Path) -> None:
    root = ET.fromstring(launch_file(tmp_path))
    nodes = {n.get("name"): n.attrib for n in root.iter("node")}
    assert set(nodes) == {"sim", "policy", "recorder"}
    assert {n: a["required"] for n, a in nodes.items()} == {
        "sim": "true",
        "recorder": "true",
        "policy": "false",  # a dead controller is the robot's problem, not the graph's
    }
    assert all(a["pkg"] == "ale_ros" and a["args"] == str(tmp_path) for a in nodes.values())


def test_an_episode_s_files_hold_weights_never_code(tmp_path: Path) -> None:
    """What the policy node reads: the validated tensors as safetensors, the task and the
    parameters; the node executables are the evaluator's, running the engine's interpreter
    isolated (-I) with this ale_robotics first on its path."""
    from safetensors.numpy import load_file

    task = ros_support.ros_task()
    weights = ros_support.weights(task)
    params = EpisodeParams(
        index=3, seed=99, period_s=0.008, action_high=[1.0] * 3, start_timeout_s=60.0
    )
    setup = GraphSetup(python="/engine/venv/bin/python", path=("/overlay",))
    launch = prepare(tmp_path, task, weights, params, setup)
    assert launch.read_text() == launch_file(tmp_path)
    loaded = load_file(str(tmp_path / "policy.safetensors"))
    assert loaded.keys() == weights.keys()
    assert all((loaded[k] == weights[k]).all() for k in weights)
    script = (tmp_path / "pkg" / "ale_ros" / "policy").read_text()
    assert script.startswith("#!/bin/sh\nexec /engine/venv/bin/python -I -c ")
    assert "sys.path[:0] = ['/overlay']" in script
    assert "ale_robotics.rollouts.ros.nodes.policy import main" in script
    assert (tmp_path / "pkg" / "ale_ros" / "policy").stat().st_mode & 0o111
    assert "<name>ale_ros</name>" in (tmp_path / "pkg" / "ale_ros" / "package.xml").read_text()
