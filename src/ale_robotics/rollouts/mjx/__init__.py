"""The ``mjx`` rollout kind: a shard's episodes as one jitted, vmapped JAX program (MuJoCo MJX).

Registered as ``mjx`` in ``pyproject.toml``; needs the optional extra ``mjx``. The kind
is in :mod:`.kind` (imports no JAX), the jitted rollout in :mod:`.rollout` and the env
families' step in JAX in :mod:`.families` (both import JAX, and are imported only when a
shard runs).
"""

from ale_robotics.rollouts.mjx.kind import FAMILY_IDS, MjxKind, MjxUnavailable, WorkerNeeds

__all__ = ["FAMILY_IDS", "MjxKind", "MjxUnavailable", "WorkerNeeds"]
