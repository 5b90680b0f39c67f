"""Weights and layouts shared by the executor tests (importable as ``execution_helpers``)."""

from __future__ import annotations

import numpy as np

from ale_robotics.tasks import TaskSpec

WORKERS = 2
OBJECT_STORE_BYTES = 200 * 1024**2
"""Ray in these tests: a private local instance of 2 CPUs and a 200 MB object store."""


def stable_weights(task: TaskSpec) -> dict[str, np.ndarray]:
    """A contract-valid MLP computing u = 3 tanh(K . obs), which balances the pendulum for
    all 1000 steps (the linear controller of tests/hardening): episodes that take a while."""
    assert task.contract is not None
    w = {r.key: np.zeros(r.shape, np.float32) for r in task.contract.tensors}
    k = np.array((0.0, 5.0, 1.0, 1.0), np.float32)
    w["l1.weight"][0] = k
    w["l1.weight"][1] = -k
    w["l2.weight"][0, 0] = 1.0
    w["l2.weight"][1, 1] = 1.0
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    return w


def overflow_weights(task: TaskSpec) -> dict[str, np.ndarray]:
    """Finite weights whose actions are NaN (inf - inf): a PolicyFault at step 1."""
    assert task.contract is not None
    w = {r.key: np.zeros(r.shape, np.float32) for r in task.contract.tensors}
    w["l1.bias"][0] = 3e38
    w["l2.weight"][0, 0] = 3e38
    w["l2.weight"][1, 0] = 3e38
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    return w


def with_layout(task: TaskSpec, envs_per_shard: int) -> TaskSpec:
    return task.model_copy(
        update={"eval": task.eval.model_copy(update={"envs_per_shard": envs_per_shard})}
    )
