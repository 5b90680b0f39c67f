"""The policy node: the submitted weights as a controller, answering each observation.

Trusted code, untrusted data: it loads the episode's ``policy.safetensors`` (the weights
the evaluator validated against the contract and wrote there; safetensors holds tensors
only, nothing that runs), builds the contract's MLP (:mod:`ale_robotics.rollouts.mlp`, the
other policy kinds' network) and publishes, for each observation, the command computed
from it under the observation's sequence. It subscribes with a queue of one: a controller
that falls behind answers the newest observation and skips the stale ones, as a real one
does (the sim holds the last command meanwhile and counts the skipped ones missing).

Its weights are loaded before it subscribes, so the sim, which starts the clock only once
this node is connected, never times the loading.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import rospy
from safetensors.numpy import load_file
from std_msgs.msg import Float64MultiArray

from ale_robotics.rollouts.mlp import policy_for
from ale_robotics.rollouts.ros.nodes import wire
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["main"]


def run(directory: Path) -> None:
    params = wire.EpisodeParams.model_validate_json((directory / wire.PARAMS).read_bytes())
    task = TaskSpec.model_validate_json((directory / wire.TASK).read_bytes())
    weights = load_file(str(directory / wire.POLICY_FILE))
    policy = policy_for(task, weights, np.asarray(params.action_high, dtype=np.float32))
    rospy.init_node("policy", disable_signals=True)
    pub = rospy.Publisher(wire.COMMAND, Float64MultiArray, queue_size=task.env.max_episode_steps)

    def answer(msg: Any) -> None:
        data = msg.data
        obs = np.asarray(data[1:], dtype=np.float64)
        action = policy(obs[None])[0]
        pub.publish(Float64MultiArray(data=[data[0], *action.tolist()]))

    rospy.Subscriber(wire.OBSERVATION, Float64MultiArray, answer, queue_size=1, tcp_nodelay=True)
    rospy.spin()


def main() -> None:
    run(Path(sys.argv[1]))
