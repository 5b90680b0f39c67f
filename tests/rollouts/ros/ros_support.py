"""The ros engine for the tests (importable as ``ros_support``): tasks, weights, graphs.

A test marked ``ros`` needs the ros engine built (``sudo make ros-engine``: Debian's ROS 1
from apt, then the venv). Where it is not, the test is skipped saying so and how to run it,
so ``make test`` stays green on a machine without it; with ``ALE_REQUIRE_ROS=1`` (``.ci/run``
sets it after building the engine) or ``ALE_REQUIRE_ENGINES=1`` a missing engine fails it
instead, so CI can never pass by skipping them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from engine_support import REQUIRED as ENGINES_REQUIRED
from engine_support import engine_problem

from ale_robotics.tasks import TaskSpec, default_registry

REQUIRED = os.environ.get("ALE_REQUIRE_ROS") == "1" or ENGINES_REQUIRED
TASK = "td3-hopper-ros-v1"
HOW = (
    "left to CI (.ci/run builds it with make ros-engine and sets ALE_REQUIRE_ROS=1); to run "
    "them here: sudo make ros-engine && ALE_REQUIRE_ROS=1 .venv/bin/pytest tests/rollouts/ros "
    "(-m 'ros and slow' for the runs end to end)"
)


def need_ros() -> None:
    """Skip the calling test where the ros engine is not built (fail under CI)."""
    problem = engine_problem("ros")
    if problem is None:
        return
    if REQUIRED:
        pytest.fail(f"ALE_REQUIRE_ROS=1, but {problem} (run: sudo make ros-engine)")
    pytest.skip(f"{problem}: {HOW}")


def ros_task(steps: int = 1000, episodes: int | None = None) -> TaskSpec:
    """The bundled ROS task with ``steps``-step episodes (and its first ``episodes``)."""
    task = default_registry().entry(TASK).spec
    env = task.env.model_copy(update={"max_episode_steps": steps})
    task = task.model_copy(update={"env": env})
    if episodes is not None:
        from ale_robotics.model.kind_registry import get_kind

        task = get_kind("ros").smoke_task(task, episodes)
    return task


def weights(task: TaskSpec, seed: int = 0, scale: float = 0.05) -> dict[str, np.ndarray]:
    """A random actor of the contract (seeded)."""
    rng = np.random.default_rng(seed)
    assert task.contract is not None
    return {
        t.key: (rng.standard_normal(t.shape) * scale).astype(np.float32)
        for t in task.contract.tensors
    }


def standing(task: TaskSpec) -> dict[str, np.ndarray]:
    """An actor that holds the hopper up for the whole episode (a PD controller on the
    three joints, packed exactly into the contract's MLP): episodes that last, so a test can
    act on a graph while its control loop runs."""
    assert task.contract is not None
    w = {t.key: np.zeros(t.shape, np.float32) for t in task.contract.tensors}
    # obs: qpos[1:] (z, torso, thigh, leg, foot angles) then qvel (6). l1 passes the joint
    # angles and velocities through ReLU as +/- pairs; l3 recombines them as -kp q - kd qd.
    kp, kd = 2.0, 0.2
    for j in range(3):
        for sign, row in ((1.0, 4 * j), (-1.0, 4 * j + 1)):
            w["l1.weight"][row, 2 + j] = sign
            w["l2.weight"][row, row] = 1.0
            w["l3.weight"][j, row] = -sign * kp
        for sign, row in ((1.0, 4 * j + 2), (-1.0, 4 * j + 3)):
            w["l1.weight"][row, 8 + j] = sign
            w["l2.weight"][row, row] = 1.0
            w["l3.weight"][j, row] = -sign * kd
    return w


def environ_of(pid: int) -> list[bytes]:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return []


def cmdline_of(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (``NAME=VALUE``): what a test's
    graphs inherited from it."""
    needle = marker.encode()
    return [
        int(e.name)
        for e in os.scandir("/proc")
        if e.name.isdigit() and needle in environ_of(int(e.name)) and alive(int(e.name))
    ]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 180.0) -> Any:
    """Poll ``check`` until it returns something truthy (its value), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def loop_started(root: Path) -> bool:
    """Whether a graph under ``root`` (the TMPDIR its worker had) started its control loop."""
    return any(
        "control loop started" in p.read_text(errors="replace")
        for p in root.glob("ale-ros-*/log/*/sim-*.log")
    )


def node_pid(marker: str, node: str) -> int | None:
    """The process of the graph node ``node`` among those holding ``marker``."""
    for pid in processes_with(marker):
        if f"ale_robotics.rollouts.ros.nodes.{node} import main" in cmdline_of(pid):
            return pid
    return None
