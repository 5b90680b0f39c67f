"""The ``ros`` rollout kind: each episode a ROS 1 launch graph, the policy a controller in it.

Registered as ``ros`` (kind) and ``ros`` (engine) in ``pyproject.toml``. The graph runs
Debian's ROS 1 (rospy, roslaunch), which imports only in Debian's own Python, so the kind's
shards run in the engine environment of :mod:`.engine` (``ale-robotics engines install
ros``, as root: it installs the Debian packages). The kind (:mod:`.kind`) imports neither
ROS nor MuJoCo: the evaluator loads it to check a task and load a submission; the graph
(:mod:`.graph`, :mod:`.namespaces`) runs in a worker of the engine, and its nodes
(:mod:`.nodes`) in processes of their own (docs/ros.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.rollouts.ros.engine import RosEngine
    from ale_robotics.rollouts.ros.kind import RosKind

__all__ = ["RosEngine", "RosKind"]

_WHERE = {
    "RosKind": "ale_robotics.rollouts.ros.kind",
    "RosEngine": "ale_robotics.rollouts.ros.engine",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
