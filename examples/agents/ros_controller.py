"""Reference agent for ``td3-hopper-ros-v1``: submit the shipped TD3 Hopper actor.

The task deploys the submitted actor as a 125 Hz ROS 1 controller (the evaluator's launch
graphs, docs/ros.md); what an agent hands over is only the actor's weights, as for any TD3
batch task. This agent trains nothing: it submits
``checkpoints/td3-hopper-ros-v1/policy.safetensors`` (TD3 trained offline on Hopper-v5 with
``td3_train.py``; how, and its local returns, in that folder's ``meta.json``) through
``submit_checkpoint.py``, found beside this file so the working directory does not matter.

    ale-robotics run td3-hopper-ros-v1 --agent "python examples/agents/ros_controller.py"

Exit status as ``submit_checkpoint.py``'s: 0 when the job succeeded, 1 for another terminal
state (the evaluator's reason on stderr), 2 for a local problem.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKPOINT = HERE / "checkpoints" / "td3-hopper-ros-v1" / "policy.safetensors"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    from submit_checkpoint import main as submit

    return submit(["--checkpoint", str(CHECKPOINT), *(argv or [])])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
