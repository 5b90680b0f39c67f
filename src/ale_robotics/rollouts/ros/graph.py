"""One episode as a ROS 1 launch graph: made, started, read and torn down by the worker.

For each episode the worker writes a directory of its own (:mod:`.nodes.wire`: the task,
the episode's parameters, the validated weights as safetensors), a ROS package ``ale_ros``
whose three executables start the nodes of :mod:`.nodes` with the engine's interpreter,
and a launch file naming them::

    roscore (rosmaster :11311, rosout)        started by roslaunch, as for any launch file
    sim       required   MuJoCo, the robot at the control rate
    policy               the submitted weights as a controller
    recorder  required   the episode's record, read by the evaluator

and starts ``roslaunch`` in namespaces of its own (:mod:`.namespaces`: a private network
with its own loopback, so its roscore is on the usual port and nothing else can reach it;
a private PID space, so one kill ends every process of it). It waits for the recorder's
``episode.json``, kills the graph, and returns the record with the graph's own costs:
seconds from ``roslaunch`` to the first control tick (the graph's start, which the sim
begins only once every node is connected) and from the kill to the last process gone.

A policy node that crashes or hangs is the policy's: the graph goes on without it (it is
not ``required``), the sim holds the last command, and the episode ends as the robot's
would. Anything else that ends the graph without a record (a required node failed, no
record in time) is the platform's: :class:`GraphFailed`, which the evaluator retries and
never scores.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_robotics.rollouts.ros import namespaces
from ale_robotics.rollouts.ros.nodes import wire
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["GRAPH_VAR", "GraphEpisode", "GraphFailed", "GraphSetup", "run_episode"]

GRAPH_VAR = "ALE_ROS_GRAPH"
"""Set in every process of a graph: the graph's random token (what tests find them by)."""
NODES = ("sim", "policy", "recorder")
MASTER_URI = "http://127.0.0.1:11311"
START_TIMEOUT_S = 120.0
"""The longest the sim waits for the graph to connect (roscore and three Python nodes
start in 2-6 s here, more on a loaded host)."""
GONE_TIMEOUT_S = 30.0
"""The longest a killed graph may take to disappear before that is an error."""


class GraphFailed(RuntimeError):
    """The graph ended without an episode record: the platform's failure, not the policy's."""


@dataclass(frozen=True)
class GraphSetup:
    """How the nodes start: the engine's interpreter and what goes first on its path."""

    python: str
    path: tuple[str, ...]
    roslaunch: str = "roslaunch"


@dataclass(frozen=True)
class GraphEpisode:
    """A recorded episode and what its graph cost."""

    record: wire.EpisodeRecord
    start_s: float
    """``roslaunch`` started -> the first control tick."""
    teardown_s: float
    """The kill -> no process of the graph left."""


def _package(root: Path, setup: GraphSetup) -> None:
    """The ROS package ``ale_ros``: a manifest and one executable per node."""
    package = root / "ale_ros"
    package.mkdir(parents=True)
    (package / "package.xml").write_text(
        '<?xml version="1.0"?>\n<package format="2">\n  <name>ale_ros</name>\n'
        "  <version>1.0.0</version>\n  <description>ALE Robotics evaluation graph"
        '</description>\n  <maintainer email="ale@localhost">ale</maintainer>\n'
        "  <license>Apache-2.0</license>\n</package>\n"
    )
    for node in NODES:
        code = (
            f"import sys; sys.path[:0] = {list(setup.path)!r}; "
            f"from ale_robotics.rollouts.ros.nodes.{node} import main; main()"
        )
        script = package / node
        script.write_text(f'#!/bin/sh\nexec {_quote(setup.python)} -I -c "{code}" "$@"\n')
        script.chmod(0o755)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def launch_file(directory: Path) -> str:
    """The launch file of an episode's graph (see the module docstring)."""
    root = ET.Element("launch")
    for node in NODES:
        ET.SubElement(
            root,
            "node",
            {
                "pkg": "ale_ros",
                "type": node,
                "name": node,
                "args": str(directory),
                "output": "log",
                "required": "false" if node == "policy" else "true",
            },
        )
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


ROSCORE_XML = """<launch>
  <!-- roscore's core, as /etc/ros/roscore.xml has it but for its two version parameters,
       whose values roslaunch gets by running rosversion twice at every start -->
  <node pkg="rosout" type="rosout" name="rosout" respawn="true"/>
</launch>
"""


def _environment(directory: Path, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "ROSLAUNCH_"))}
    env.update(
        {
            "ROS_MASTER_URI": MASTER_URI,
            "ROS_IP": "127.0.0.1",
            "ROS_HOME": str(directory / "ros_home"),
            "ROS_LOG_DIR": str(directory / "log"),
            "ROS_PACKAGE_PATH": str(directory / "pkg"),
            "ROS_ETC_DIR": str(directory / "etc"),
            "MUJOCO_GL": "disable",
            "PYTHONDONTWRITEBYTECODE": "1",
            GRAPH_VAR: token,
        }
    )
    return env


def prepare(
    directory: Path,
    task: TaskSpec,
    weights: dict[str, Any],
    params: wire.EpisodeParams,
    setup: GraphSetup,
) -> Path:
    """Write an episode's files into ``directory``; the launch file's path."""
    from safetensors.numpy import save_file

    (directory / wire.TASK).write_text(task.model_dump_json())
    (directory / wire.PARAMS).write_text(params.model_dump_json())
    save_file(dict(weights), str(directory / wire.POLICY_FILE))
    _package(directory / "pkg", setup)
    (directory / "etc").mkdir()
    (directory / "etc" / "roscore.xml").write_text(ROSCORE_XML)
    launch = directory / "graph.launch"
    launch.write_text(launch_file(directory))
    return launch


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _tail(path: Path, lines: int = 8) -> str:
    with contextlib.suppress(OSError):
        return " / ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    return "(no output)"


def run_episode(
    task: TaskSpec,
    weights: dict[str, Any],
    params: wire.EpisodeParams,
    setup: GraphSetup,
    *,
    keep: Path | None = None,
) -> GraphEpisode:
    """One episode's graph, from start to teardown (see the module docstring);
    :class:`GraphFailed` when it ends without a record. ``keep``: a directory to copy the
    episode's files and logs to before they are removed (debugging)."""
    directory = Path(tempfile.mkdtemp(prefix="ale-ros-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        launch = prepare(directory, task, weights, params, setup)
        log = directory / "roslaunch.out"
        steps = task.env.max_episode_steps
        budget = params.start_timeout_s + 30.0 + steps * max(4 * params.period_s, 0.05)
        with open(log, "wb") as out:
            started = time.monotonic()
            proc = subprocess.Popen(
                [
                    "unshare",
                    "--fork",
                    "--kill-child",
                    "--",
                    setup.roslaunch,
                    "--skip-log-check",
                    str(launch),
                ],
                env=_environment(directory, secrets.token_hex(8)),
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=namespaces.enter,  # see namespaces.py: the namespaces are made there
            )
        record_path = directory / wire.RECORD
        while not record_path.exists():
            if proc.poll() is not None:
                raise GraphFailed(
                    f"the episode's graph ended without a record (exit {proc.returncode}): "
                    + _tail(log)
                )
            if time.monotonic() - started > budget:
                raise GraphFailed(f"no episode record after {budget:.0f} s: " + _tail(log))
            time.sleep(0.02)
        record = wire.EpisodeRecord.model_validate_json(record_path.read_bytes())
        teardown = _kill(proc)
        proc = None
        if keep is not None:
            shutil.copytree(directory, keep, dirs_exist_ok=True)
        return GraphEpisode(record, record.timing.loop_start - started, teardown)
    finally:
        if proc is not None:
            with contextlib.suppress(GraphFailed):
                _kill(proc)
            if keep is not None:
                shutil.copytree(directory, keep, dirs_exist_ok=True)
        shutil.rmtree(directory, ignore_errors=True)


def _kill(proc: subprocess.Popen[bytes]) -> float:
    """SIGKILL to ``unshare``: roslaunch, pid 1 of the graph, gets one too, and with it
    every process of the namespace; seconds until none is left."""
    t0 = time.monotonic()
    first = _children(proc.pid)  # roslaunch: the namespace's pid 1
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = t0 + GONE_TIMEOUT_S
    while any(_alive(pid) for pid in first):
        if time.monotonic() > deadline:
            raise GraphFailed(f"the graph's processes {first} outlived its kill")
        time.sleep(0.005)
    return time.monotonic() - t0


def graph_pids(token: str | None = None) -> list[int]:
    """Processes of this host in a graph (``token``: of that graph): what must be none once
    a graph was torn down. Reads ``/proc/*/environ`` (the caller's own processes)."""
    found = []
    needle = f"{GRAPH_VAR}={token}".encode() if token else f"{GRAPH_VAR}=".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            env = Path(entry.path, "environ").read_bytes().split(b"\0")
            if any(v.startswith(needle) for v in env) and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found
