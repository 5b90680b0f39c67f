"""Episodes as real ROS 1 graphs (the ros engine): what they measure, and how they end.

Each test runs whole graphs (roscore, the three nodes) in the test's own TMPDIR, with a
marker in the environment every process of them inherits, so that the test finds them
(and proves none is left) without touching another test's. Nothing here depends on how
fast the host is: an episode's return is compared with the episode its own recorded hold
schedule implies (computed without a graph), whatever the timing did.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ros_support

from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.ros.graph import GraphFailed, GraphSetup
from ale_robotics.rollouts.ros.kind import graph_setup, run_graph_episode
from ale_robotics.rollouts.ros.schedule import replay_episode

pytestmark = pytest.mark.ros
KIND = get_kind("ros")


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's TMPDIR (episode directories land there) and the marker its graphs carry."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile reads TMPDIR again
    token = uuid.uuid4().hex
    monkeypatch.setenv("ALE_TEST_GRAPH", token)
    return f"ALE_TEST_GRAPH={token}"


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def _result(thread: threading.Thread, box: dict[str, Any]) -> Any:
    thread.join(timeout=600)
    assert not thread.is_alive(), "the episode did not end"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _matches_its_schedule(task: Any, weights: Any, seed: int, outcome: EpisodeOutcome) -> None:
    assert outcome.control is not None
    again = replay_episode(task, weights, outcome.index, seed, outcome.control.holds)
    assert (outcome.ret, outcome.length, outcome.terminated) == (
        again.ret,
        again.length,
        again.terminated,
    )


def _nothing_left(marker: str) -> None:
    ros_support.wait_for(
        "no process of the graph left", lambda: not ros_support.processes_with(marker), 30
    )


def test_an_episode_is_the_one_its_schedule_implies(marker: str) -> None:
    """The standing controller for 150 steps (1.2 s at 125 Hz): the recorded return is the
    schedule's episode to the bit, and the Gymnasium kind's when nothing was held; the
    roscore is never on the host's loopback; nothing of the graph is left after."""
    task = ros_support.ros_task(150)
    w = ros_support.standing(task)
    thread, box = _in_thread(lambda: KIND.run_shard(task, w, [(0, 101)]))
    seen_running = False
    while thread.is_alive():
        seen_running = seen_running or bool(ros_support.processes_with(marker))
        with pytest.raises(ConnectionRefusedError), socket.socket() as s:
            s.connect(("127.0.0.1", 11311))
        thread.join(timeout=0.05)
    [outcome] = _result(thread, box)
    assert seen_running
    _matches_its_schedule(task, w, 101, outcome)
    loop = outcome.control
    assert loop is not None and outcome.length == 150 and not outcome.terminated
    assert loop.graph_start_s > 0 and loop.max_tick_lag_us >= 0
    received = outcome.length - loop.missing
    assert received > 0 and loop.latency_p50_us is not None and loop.latency_p50_us > 0
    assert loop.held_steps >= loop.missing  # a missing command's step held an older one
    if not loop.holds:
        gym_task = task.model_copy(
            update={"eval": task.eval.model_copy(update={"rollout": "gymnasium"})}
        )
        [theirs] = get_kind("gymnasium").run_shard(gym_task, w, [(0, 101)])
        assert (outcome.ret, outcome.length) == (theirs.ret, theirs.length)
    _nothing_left(marker)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["crashed", "hung"])
def test_a_dead_or_hung_policy_node_is_the_episode_s_not_the_graph_s(
    marker: str, tmp_path: Path, how: signal.Signals
) -> None:
    """The policy node killed (or stopped) once the control loop runs: the episode goes on
    to its end holding the last command received, as a robot would, and is recorded, with
    the missing commands counted; it is no failure of the graph. A stopped node is killed
    with the graph."""
    task = ros_support.ros_task(500)
    w = ros_support.standing(task)
    thread, box = _in_thread(lambda: KIND.run_shard(task, w, [(0, 202)]))
    ros_support.wait_for("the control loop", lambda: ros_support.loop_started(tmp_path))
    policy = ros_support.wait_for("the policy node", lambda: ros_support.node_pid(marker, "policy"))
    os.kill(policy, how)
    [outcome] = _result(thread, box)
    loop = outcome.control
    assert loop is not None and loop.missing > 0
    first, count, seq = loop.holds[-1]
    assert first + count == outcome.length  # held to the episode's end...
    assert seq < first  # ...the last command the node sent before it stopped
    _matches_its_schedule(task, w, 202, outcome)
    _nothing_left(marker)
    assert not ros_support.alive(policy)


def test_a_non_finite_command_is_the_submission_s_fault(marker: str) -> None:
    """Finite weights whose command is NaN (ReLU(3e38) * 3e38 - the same): PolicyFault, as in
    every policy kind, and the graph is gone."""
    task = ros_support.ros_task(50)
    w = ros_support.weights(task, scale=0.0)
    w["l1.bias"][0] = 3e38
    w["l2.weight"][0, 0] = 3e38
    w["l2.weight"][1, 0] = 3e38
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    with pytest.raises(PolicyFault) as caught:
        KIND.run_shard(task, w, [(0, 303)])
    assert caught.value.what == "action" and caught.value.value == "nan"
    assert caught.value.episode == 0 and caught.value.step >= 1
    _nothing_left(marker)


@pytest.mark.slow
def test_a_rerun_applies_the_recorded_schedule(marker: str) -> None:
    """A re-run with the signed schedule (what an audit runs) records the same episodes,
    whatever this run's timing, and measures its own."""
    task = ros_support.ros_task(60, episodes=2)
    w = ros_support.weights(task, seed=9, scale=0.3)
    seeds = [(0, 404), (1, 405)]
    first = KIND.run_shard(task, w, seeds)
    record = KIND.outcome_record(task.eval.base_seeds, first)
    # a schedule the live run is unlikely to have: hold the null command for 3 steps
    forced = record.model_copy(deep=True)
    forced.episodes[1].holds = [[0, 3, -1]]  # type: ignore[union-attr]
    again = KIND.run_shard(task, KIND.rerun_artifact(w, forced), seeds)
    assert [o.control.holds for o in again] == [  # type: ignore[union-attr]
        tuple(tuple(r) for r in e.holds)  # type: ignore[union-attr]
        for e in forced.episodes  # type: ignore[union-attr]
    ]
    assert (again[0].ret, again[0].length) == (first[0].ret, first[0].length)
    for outcome, (_, seed) in zip(again, seeds, strict=True):
        _matches_its_schedule(task, w, seed, outcome)
    _nothing_left(marker)


def test_a_graph_that_cannot_run_is_the_platform_s_failure(marker: str) -> None:
    """Nodes whose interpreter is missing: the required sim dies, roslaunch ends the graph,
    and the worker raises GraphFailed (an infrastructure failure), never a policy fault."""
    task = ros_support.ros_task(20)
    setup = graph_setup()
    broken = GraphSetup(python="/nonexistent/python", path=setup.path)
    with pytest.raises(GraphFailed, match="without a record"):
        run_graph_episode(task, ros_support.weights(task), 0, 1, broken)
    _nothing_left(marker)


def test_killing_the_evaluator_mid_episode_leaves_nothing(marker: str, tmp_path: Path) -> None:
    """The evaluator's executor, in a process of its own, runs an episode in its engine
    worker; SIGKILL to it once the control loop runs: the worker notices and exits, and its
    graph dies with it (roscore, rosout, the nodes, the namespaces)."""
    here = Path(__file__).parent
    script = tmp_path / "evaluator.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = [{str(here)!r}, {str(here.parent.parent)!r}]
            import ros_support
            from ale_robotics.evaluator.execution import make_executor
            task = ros_support.ros_task(1000, episodes=1)
            pool = make_executor("local", workers=1)
            pool.run(task, ros_support.standing(task), [505], indices=[0])
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], env=os.environ.copy())
    try:
        ros_support.wait_for("the control loop", lambda: ros_support.loop_started(tmp_path))
        graph = ros_support.processes_with(marker)
        assert len(graph) >= 6  # the worker, unshare, roslaunch, roscore, rosout, 3 nodes
        proc.kill()
        proc.wait(timeout=60)
        _nothing_left(marker)
    finally:
        for pid in ros_support.processes_with(marker):
            os.kill(pid, signal.SIGKILL)
