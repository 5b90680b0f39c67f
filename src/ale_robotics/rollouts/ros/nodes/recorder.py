"""The recorder node: what the evaluator reads an episode's metrics from.

It listens to the sim's telemetry, one message per control step, and adds the rewards up
in step order (the return), keeps each step's applied command (the hold schedule) and the
flags, and when the sim's end message comes writes ``episode.json``
(:class:`~.wire.EpisodeRecord`) and exits, which ends the graph (it is ``required`` in
the launch file). Telemetry travels over TCP with a queue longer than an episode, so none
is dropped; a gap in the steps, or an end whose step count differs from the telemetry's,
is the graph's failure and leaves no record (the evaluator then fails the episode as
infrastructure, never as the policy's).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import rospy
from std_msgs.msg import Float64MultiArray, String

from ale_robotics.rollouts.ros.nodes import wire

__all__ = ["main"]


def run(directory: Path) -> None:
    params = wire.EpisodeParams.model_validate_json((directory / wire.PARAMS).read_bytes())
    lock = threading.Lock()
    rewards: list[float] = []
    applied: list[int] = []
    flags = {"terminated": False}
    problems: list[str] = []
    done = threading.Event()

    def on_step(msg: Any) -> None:
        step, reward, terminated, _truncated, seq, _tick = msg.data
        with lock:
            if int(step) != len(rewards):
                problems.append(f"telemetry of step {int(step)} after {len(rewards)} steps")
                return
            rewards.append(float(reward))
            applied.append(int(seq))
            flags["terminated"] = bool(terminated)

    def on_end(msg: Any) -> None:
        end = json.loads(msg.data)
        # the end comes on its own connection: wait for the telemetry it accounts for
        deadline = rospy.get_time() + 10.0
        while rospy.get_time() < deadline:
            with lock:
                if len(rewards) >= end["steps"] or problems:
                    break
            rospy.sleep(0.001)
        with lock:
            if problems or len(rewards) != end["steps"]:
                why = problems or [f"{len(rewards)} steps of telemetry, {end['steps']} simulated"]
                rospy.logerr("recorder: the episode's telemetry is incomplete: %s", why[0])
                done.set()
                return
            ret = 0.0
            for r in rewards:
                ret += r
            record = wire.EpisodeRecord(
                index=params.index,
                episode_return=ret,
                length=len(rewards),
                terminated=flags["terminated"],
                applied=list(applied),
                timing=wire.LoopTiming.model_validate(end["timing"]),
                fault=None if end.get("fault") is None else wire.Fault(**end["fault"]),
            )
        tmp = directory / (wire.RECORD + ".tmp")
        tmp.write_text(record.model_dump_json())
        os.replace(tmp, directory / wire.RECORD)
        done.set()

    rospy.init_node("recorder", disable_signals=True)
    rospy.Subscriber(wire.TELEMETRY, Float64MultiArray, on_step, queue_size=None, tcp_nodelay=True)
    rospy.Subscriber(wire.END, String, on_end, queue_size=1)
    done.wait()
    rospy.signal_shutdown("episode recorded")


def main() -> None:
    run(Path(sys.argv[1]))
