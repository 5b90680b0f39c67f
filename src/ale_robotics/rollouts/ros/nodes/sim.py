"""The simulator node: the robot. MuJoCo through the task's Gymnasium env, at its control rate.

It keeps wall-clock time as a robot does: tick ``k`` comes at ``loop_start + k * period``
(the env's ``dt``: 0.008 s for Hopper, 125 Hz), whether or not the controller kept up. At
each tick it applies the newest command received by then, steps the physics one control
period and publishes the next observation. The command for step ``k`` answers observation
``k`` and is due by tick ``k + 1``, one period after the observation went out; a command
that comes later is *late*, one that never comes is *missing*, and meanwhile the step
applies the last command received (an actuator holds its setpoint; before the first one,
the null command). So the physics of step ``k`` is Gymnasium's ``env.step(a_k)`` when the
policy kept up, and the episode equals the ``gymnasium`` kind's to the bit; when it did
not, the steps it missed applied what a real controller's robot would have.

What it measures, sent to the recorder at the end: each command's latency (observation
published to command received, on the sim's monotonic clock), late and missing counts, and
how late its own ticks started (a host too loaded to keep the rate). A non-finite command
or reward ends the episode as the submission's fault, as in every policy kind.

Replay (``params.replay``, an audit): each step applies the command the recorded schedule
names, waiting for it as long as it takes, so the physics is the recorded episode's on any
host; the timing is measured again, for display.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import rospy
from std_msgs.msg import Float64MultiArray, String

from ale_robotics.rollouts.ros.nodes import wire
from ale_robotics.rollouts.ros.schedule import NULL_COMMAND, applied_commands
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["main"]

_REPLAY_WAIT_S = 60.0
"""In a replay, the longest a step waits for its command (the policy node died: the audit's
re-run fails, it cannot be the recorded episode)."""


class _Commands:
    """Commands as the subscriber thread receives them, keyed by sequence."""

    def __init__(self, width: int, steps: int) -> None:
        self.width = width
        self.values: dict[int, np.ndarray] = {}
        self.received_at = np.full(steps + 1, np.nan)
        self.newest = NULL_COMMAND
        self.malformed = 0
        self.cond = threading.Condition()

    def on_message(self, msg: Any) -> None:
        now = time.monotonic()
        data = msg.data
        if len(data) != self.width + 1:
            with self.cond:
                self.malformed += 1
            return
        seq = int(data[0])
        with self.cond:
            if seq in self.values or not 0 <= seq < len(self.received_at):
                self.malformed += 1
                return
            self.values[seq] = np.asarray(data[1:], dtype=np.float64)
            self.received_at[seq] = now
            self.newest = max(self.newest, seq)
            self.cond.notify_all()

    def wait_for(self, seq: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: seq in self.values, timeout)


def _wait_connected(pubs: list[tuple[Any, int]], sub: Any, timeout: float) -> None:
    """Until every publisher has its subscribers and the command topic its publisher."""
    deadline = time.monotonic() + timeout
    while not all(p.get_num_connections() >= n for p, n in pubs) or sub.get_num_connections() < 1:
        if time.monotonic() > deadline or rospy.is_shutdown():
            raise RuntimeError(f"the graph did not connect within {timeout:.0f} s")
        time.sleep(0.005)


def _command(commands: _Commands, step: int, replay: list[int] | None) -> tuple[int, Any]:
    """The command this tick applies and its sequence number: the newest received, or in
    a replay the one the recorded hold schedule names (waited for)."""
    if replay is None:
        with commands.cond:
            seq = commands.newest
            return seq, commands.values.get(seq)
    seq = replay[step]
    # every command up to this step's own, so that a later hold finds the one it names
    if not commands.wait_for(step, _REPLAY_WAIT_S) or (
        seq != NULL_COMMAND and not commands.wait_for(seq, _REPLAY_WAIT_S)
    ):
        raise RuntimeError(f"replay: no command for step {step} from the policy node")
    return seq, commands.values.get(seq)


def _loop_timing(
    commands: _Commands,
    published: np.ndarray,
    loop_start: float,
    steps: int,
    period: float,
    lag_max: float,
) -> wire.LoopTiming:
    """The episode's command latencies and lateness (late: received after the tick that
    applies it, in a replay too, where the tick then waited for it)."""
    with commands.cond:
        got = commands.received_at[:steps]
        latency = (got - published[:steps]) * 1e6
        received = np.isfinite(latency)
        deadline = loop_start + np.arange(1, steps + 1) * period
        return wire.LoopTiming(
            loop_start=loop_start,
            received=int(received.sum()),
            late=int(np.sum(received & (got > deadline))),
            latency_us=[float(x) for x in latency[received]],
            max_tick_lag_us=lag_max * 1e6,
        )


def run(directory: Path) -> None:
    """One episode (see the module docstring)."""
    from ale_robotics.envs.make import make_env

    params = wire.EpisodeParams.model_validate_json((directory / wire.PARAMS).read_bytes())
    task = TaskSpec.model_validate_json((directory / wire.TASK).read_bytes())
    env = make_env(task.env)
    steps = task.env.max_episode_steps
    width = int(np.prod(env.action_space.shape))
    dtype = env.action_space.dtype
    null = np.zeros(env.action_space.shape, dtype=dtype)
    replay = None
    if params.replay is not None:
        replay = applied_commands(params.replay, steps)

    rospy.init_node("sim", disable_signals=True)
    commands = _Commands(width, steps)
    obs_pub = rospy.Publisher(wire.OBSERVATION, Float64MultiArray, queue_size=1)
    tel_pub = rospy.Publisher(wire.TELEMETRY, Float64MultiArray, queue_size=steps + 1)
    end_pub = rospy.Publisher(wire.END, String, queue_size=1, latch=True)
    sub = rospy.Subscriber(
        wire.COMMAND, Float64MultiArray, commands.on_message, queue_size=steps + 1, tcp_nodelay=True
    )
    _wait_connected([(obs_pub, 1), (tel_pub, 1), (end_pub, 1)], sub, params.start_timeout_s)

    obs, _ = env.reset(seed=params.seed)
    published = np.full(steps + 1, np.nan)
    period = params.period_s
    step, lag_max = 0, 0.0
    fault: wire.Fault | None = None
    terminated = False
    rospy.loginfo("control loop started: up to %d steps at %.1f Hz", steps, 1.0 / period)
    loop_start = time.monotonic()
    published[0] = loop_start
    obs_pub.publish(Float64MultiArray(data=[0.0, *obs.tolist()]))
    while True:
        tick = loop_start + (step + 1) * period
        now = time.monotonic()
        if now < tick:
            time.sleep(tick - now)
            now = time.monotonic()
        lag_max = max(lag_max, now - tick)
        seq, value = _command(commands, step, replay)
        if replay is not None:  # the tick waited for the command: applied now
            now = time.monotonic()
        action = null if value is None else value.astype(dtype)
        if not np.isfinite(action).all():
            bad = float(action[~np.isfinite(action)][0])
            fault = wire.Fault(what="action", value=str(bad), step=step + 1)
            break
        obs, reward, term, trunc, _ = env.step(action)
        reward = float(reward)
        if not math.isfinite(reward):
            fault = wire.Fault(what="reward", value=str(reward), step=step + 1)
            break
        done = bool(term or trunc)
        tel_pub.publish(
            Float64MultiArray(
                data=[float(step), reward, float(term), float(trunc), float(seq), now]
            )
        )
        step += 1
        if done:
            terminated = bool(term)
            break
        published[step] = time.monotonic()
        obs_pub.publish(Float64MultiArray(data=[float(step), *obs.tolist()]))

    # A command still on its way counts as received (late) if it comes within one more
    # period; the rest are missing. Late: received after its deadline, the tick that
    # applies it (in a replay too, where the tick then waited for it).
    time.sleep(period)
    timing = _loop_timing(commands, published, loop_start, step, period, lag_max)
    end = {"steps": step, "terminated": terminated, "timing": timing.model_dump(mode="json")}
    if fault is not None:
        end["fault"] = fault.model_dump(mode="json")
    end_pub.publish(String(data=json.dumps(end)))
    rospy.spin()  # until roslaunch (the recorder is required) or the evaluator ends the graph


def main() -> None:
    run(Path(sys.argv[1]))
