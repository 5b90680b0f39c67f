"""Contract-valid policies that output NaN: finite float32 weights whose products overflow.

Every weight is finite (so validation passes), but ``3e38 * 3e38`` rounds to inf
in the hidden layers and the output layer then adds ``inf + (-inf)`` = NaN. The
NaN has to come from two infinite *inputs* of a matmul: an overflowing product
inside one fused multiply-add stays inf (FMA does not round the product first),
so ``a*b - a*b`` in one dot product gives inf or NaN depending on the BLAS kernel.
"""

from __future__ import annotations

import numpy as np

from ale_robotics.tasks import TaskSpec

HUGE = np.float32(3e38)
"""Finite (float32 max is 3.4e38), but its square overflows."""

MIXED_GAINS = (0.283, 2.214, 0.072, 0.504)
"""u = 3 tanh(K . obs) balances InvertedPendulum-v5 from some initial states and falls
from others (found by search): under run ``FALL_RUN`` with ``FALL_SECRET``, episodes 1,
3 and 8 last the full 1000 steps, never leaning past 0.135 rad, and the seven others
lean past 0.15 rad before they fall (at 0.2)."""

FALL_RUN = "run-fall-2"
FALL_SECRET = bytes(range(32))


def _zeros(task: TaskSpec) -> dict[str, np.ndarray]:
    assert task.contract is not None
    return {r.key: np.zeros(r.shape, np.float32) for r in task.contract.tensors}


def overflow_weights(task: TaskSpec) -> dict[str, np.ndarray]:
    """NaN actions from the first step of every episode, whatever the observation.

    Hidden unit 0 of l1 is ReLU(3e38) = 3e38; l2 units 0 and 1 are both 3e38 * 3e38
    = inf; the output is inf - inf = NaN (and tanh(NaN) is NaN).
    """
    w = _zeros(task)
    w["l1.bias"][0] = HUGE
    w["l2.weight"][0, 0] = HUGE
    w["l2.weight"][1, 0] = HUGE
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    return w


def controller_weights(
    task: TaskSpec, gains: tuple[float, ...] = MIXED_GAINS
) -> dict[str, np.ndarray]:
    """The linear controller u = 3 tanh(K . obs) as a contract MLP (ReLU(k.x) - ReLU(-k.x))."""
    w = _zeros(task)
    k = np.array(gains, np.float32)
    w["l1.weight"][0] = k
    w["l1.weight"][1] = -k
    w["l2.weight"][0, 0] = 1.0
    w["l2.weight"][1, 1] = 1.0
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    return w


def fall_detector_weights(task: TaskSpec, threshold: float = 0.14) -> dict[str, np.ndarray]:
    """The controller above, plus a detector that outputs NaN once |theta| > ``threshold``.

    Two more l1 units are ReLU(+-1e6 theta - 1e6 threshold): zero while upright, so
    until then the actions are exactly the controller's. Past the threshold (about
    to fall: the episode terminates at 0.2) l2 units 2 and 3 overflow to inf and
    the output is NaN. On the old evaluator such an episode did not fall at all in
    the record (MuJoCo zeroes a NaN control) or voided the run; it must fail the
    submission.
    """
    w = controller_weights(task)
    w["l1.weight"][2, 1] = 1e6
    w["l1.bias"][2] = -1e6 * threshold
    w["l1.weight"][3, 1] = -1e6
    w["l1.bias"][3] = -1e6 * threshold
    for unit in (2, 3):
        w["l2.weight"][unit, 2] = HUGE
        w["l2.weight"][unit, 3] = HUGE
    w["l3.weight"][0, 2] = 1.0
    w["l3.weight"][0, 3] = -1.0
    return w
