"""The agent-side SDK: :class:`AleClient` (batch mode and the connection) and Gymnasium envs.

``RemoteEnv`` and ``RemoteVectorEnv`` (interactive tasks, and the practice sessions of
a batch task whose simulator runs only in the evaluator) import Gymnasium, so
they are loaded on first use (PEP 562): a batch agent that only submits files
does not pay for it. ``RemoteEnv`` works with Gymnasium 0.29 and 1.x,
``RemoteVectorEnv`` needs 1.x. A task registers as a Gymnasium id with
``entry_point="ale_robotics.client:RemoteEnv"`` (and
``vector_entry_point="ale_robotics.client:RemoteVectorEnv"`` for ``gym.make_vec``).
Stable-Baselines3's ``VecEnv`` over one batched session is
:class:`ale_robotics.client.sb3.RemoteVecEnv` (the ``sb3`` extra), imported from
there so that nothing else needs SB3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ale_robotics.client.sdk import (
    ENV_VARS,
    AleClient,
    CheckpointAck,
    JobStatus,
    RunGrant,
    TaskView,
)

if TYPE_CHECKING:
    from ale_robotics.client.remote_env import RemoteEnv
    from ale_robotics.client.session import RemoteSession, SessionStep, StepTransport
    from ale_robotics.client.spaces import space_from_spec
    from ale_robotics.client.vector_env import RemoteVectorEnv

__all__ = [
    "ENV_VARS",
    "AleClient",
    "CheckpointAck",
    "JobStatus",
    "RemoteEnv",
    "RemoteSession",
    "RemoteVectorEnv",
    "RunGrant",
    "SessionStep",
    "StepTransport",
    "TaskView",
    "space_from_spec",
]

_LAZY = {
    "RemoteEnv": "ale_robotics.client.remote_env",
    "RemoteVectorEnv": "ale_robotics.client.vector_env",
    "RemoteSession": "ale_robotics.client.session",
    "SessionStep": "ale_robotics.client.session",
    "StepTransport": "ale_robotics.client.session",
    "space_from_spec": "ale_robotics.client.spaces",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
