"""Small helpers shared by tests (importable as ``helpers``)."""

from __future__ import annotations

import numpy as np

from ale_robotics.tasks import TaskSpec

TASK_ID = "td3-inverted-pendulum-v1"


def random_weights(task: TaskSpec, seed: int = 0, scale: float = 0.1) -> dict[str, np.ndarray]:
    """Weights that satisfy the contract (a bad, quickly-falling policy: short episodes)."""
    assert task.contract is not None
    rng = np.random.default_rng(seed)
    return {
        r.key: (rng.standard_normal(r.shape) * scale).astype(r.dtype) for r in task.contract.tensors
    }
