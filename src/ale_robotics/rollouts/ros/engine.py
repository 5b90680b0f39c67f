"""The ``ros`` engine: Debian's ROS 1 and MuJoCo 3.3.0, for the ``ros`` kind's launch graphs.

ROS 2 and Gazebo are not installable from the registries this project uses (no ``rclpy``
on PyPI or in Debian bookworm); ROS 1 is: Debian's ``ros-core`` and the Python packages of
``ros_comm`` (26 MB, 63 packages). They are built for Debian's ``/usr/bin/python3`` and
installed under its ``dist-packages``, so the engine's venv is made from that interpreter
and opened to its system site-packages once its own pins
(``constraints/engine-ros.txt``: MuJoCo 3.3.0, Gymnasium, numpy, pydantic, safetensors at
the project's versions) are installed and checked (:mod:`ale_robotics.engines.system`).

The install's warm-up runs one short episode as a real graph (namespaces, roscore, the
three nodes, the zero policy) and checks its record against the same episode computed
without a graph, so an engine that installs is one whose graphs run and measure right.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ale_robotics.engines.base import Engine

__all__ = ["ROS_PACKAGES", "RosEngine"]

ROS_PACKAGES = ("ros-core", "python3-rospy", "python3-roslaunch", "python3-std-msgs", "rosout")
"""Debian bookworm's ROS 1: the core (roscore, roslaunch), rospy and std_msgs."""

_WARM_UP = """
import time
from importlib import resources

import numpy as np

from ale_robotics.rollouts.ros.kind import TEMPLATE_TASK, graph_setup, run_graph_episode
from ale_robotics.rollouts.ros.schedule import hold_runs, replay_episode
from ale_robotics.tasks.spec import TaskSpec

# One short episode of the bundled task, with the zero policy, as a real graph; then the
# same episode without one. (The task registry is not loaded: it checks every kind's
# tasks, and the engine holds only this kind's needs.)
config = resources.files("ale_robotics.tasks") / "configs" / f"{TEMPLATE_TASK}.json"
task = TaskSpec.model_validate_json(config.read_bytes())
task = task.model_copy(update={"env": task.env.model_copy(update={"max_episode_steps": 25})})
assert task.contract is not None
zero = {t.key: np.zeros(t.shape, dtype=t.dtype) for t in task.contract.tensors}
t0 = time.monotonic()
episode = run_graph_episode(task, zero, 0, 1, graph_setup())
record = episode.record
expected = replay_episode(task, zero, 0, 1, hold_runs(record.applied))
assert record.fault is None, record.fault
assert (record.episode_return, record.length) == (expected.ret, expected.length), (
    record.episode_return, record.length, expected)
print(
    f"one graph episode of {record.length} steps: graph start {episode.start_s:.2f} s, "
    f"teardown {episode.teardown_s * 1000:.0f} ms, {time.monotonic() - t0:.1f} s in all; "
    f"its return equals the episode computed without a graph",
    flush=True,
)
"""


class RosEngine(Engine):
    """ROS 1 (Debian bookworm) and MuJoCo 3.3.0 on Debian's Python 3.11 (module docstring)."""

    name = "ros"
    python = "3.11"
    constraints = "engine-ros.txt"
    interpreter = "/usr/bin/python3"
    system_site_packages = True
    system_packages: ClassVar[tuple[str, ...]] = ROS_PACKAGES
    modules: ClassVar[tuple[str, ...]] = (
        "rospy",
        "roslaunch",
        "std_msgs.msg",
        "mujoco",
        "gymnasium",
        "numpy",
        "safetensors",
    )
    reported: ClassVar[tuple[str, ...]] = (
        "python3-rospy",
        "python3-roslaunch",
        "mujoco",
        "gymnasium",
    )
    summary = "ROS 1 (Debian's ros_comm) + MuJoCo 3.3.0: the ros kind's launch graphs"
    warm_up = _WARM_UP

    def worker_env(self, home: Path) -> dict[str, str]:
        """No OpenGL (nodes never render)."""
        return {"MUJOCO_GL": "disable"}
