"""MuJoCo Warp against the C kind: the same hidden seeds, per-episode returns within tolerance.

Each family's Warp task and its ``mujoco_rollout`` twin (:mod:`warp_tasks`) run the same
random MLP on the same hidden seeds; the Warp episodes run in the ``mujoco-warp`` engine's
worker (Warp's CPU device here), the C ones in this process. What is compared is what a
score is made of: every episode's return and length (terminations must be equal).

The stated tolerance, on ``|R_warp - R_c| / max(|R_c|, 1)`` per episode, with the largest
value measured on this host over 192 episodes (3 random policies x 64 hidden seeds):

==========================  ==========  =========  =====================================
family                      horizon     tolerance  measured
==========================  ==========  =========  =====================================
InvertedPendulum            20 steps    1e-4       0
InvertedDoublePendulum      20 steps    1e-4       1.6e-7
Reacher                     20 steps    1e-4       1.4e-6
Walker2d                    20 steps    1e-4       3.1e-5
Hopper                      20 steps    3e-2       9.5e-3 (C MuJoCo 3.3 against 4.0 alone,
                                                   Gymnasium's own Hopper: 7.5e-3)
HalfCheetah                 10 steps    2e-2       5.3e-3 (at 20 steps 0.37: the gait's
                                                   contacts amplify float32 rounding)
==========================  ==========  =========  =====================================

Whole episodes (``slow``): InvertedPendulum with the shipped TD3 checkpoint (every return
1000, equal), Reacher's 50-step episodes, InvertedDoublePendulum and Walker2d to their end
(measured 9.4e-7, 9.7e-8, 1.9e-5), all within 1e-4. Hopper and HalfCheetah are not compared
per episode over whole episodes: their contacts make them chaotic, so (as between
MuJoCo's own versions) single episodes drift apart and end at other steps (Hopper to its
end: 0.16, with other termination steps), and only short horizons are compared.

The engine must be built (``make engines``); without it these tests are skipped saying so,
and they fail instead under ``ALE_REQUIRE_ENGINES=1`` (CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from engine_support import need_engine
from warp_tasks import family_task, weights

from ale_robotics.engines import engine_used
from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.execution import LocalExecutor
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskSpec

SHORT = {  # family: (horizon, tolerance), as the module docstring states them
    "InvertedPendulum-v5": (20, 1e-4),
    "InvertedDoublePendulum-v5": (20, 1e-4),
    "Reacher-v5": (20, 1e-4),
    "Walker2d-v5": (20, 1e-4),
    "Hopper-v5": (20, 3e-2),
    "HalfCheetah-v5": (10, 2e-2),
}
WHOLE = 1e-4
"""The tolerance of whole episodes (the slow tests)."""
STEPS = 20
ENVS = 8
SECRET = bytes(range(100, 132))
CHECKPOINT = (
    Path(__file__).resolve().parents[3]
    / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"
)


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    need_engine("mujoco-warp")
    pool = LocalExecutor(workers=1)
    try:
        yield pool
    finally:
        pool.shutdown()


def _hidden(task: TaskSpec, n: int) -> list[tuple[int, int]]:
    seeds = derive_seeds(list(range(9000, 9000 + n)), "run-warp-test", SECRET)
    return [(s.index, s.value) for s in seeds]


def _both(
    executor: LocalExecutor, gym_id: str, steps: int, n: int
) -> tuple[list[EpisodeOutcome], list[EpisodeOutcome]]:
    warp = family_task(gym_id, steps)
    c = family_task(gym_id, steps, "mujoco_rollout")
    w = weights(warp)
    runs = _hidden(warp, n)
    on_warp = executor.run(warp, w, [s for _, s in runs], indices=[i for i, _ in runs])
    on_c = rollout_episodes(c, w, runs)
    return on_warp, on_c


def _check(
    gym_id: str, on_warp: list[EpisodeOutcome], on_c: list[EpisodeOutcome], rtol: float
) -> None:
    assert [o.index for o in on_warp] == [o.index for o in on_c]
    assert [o.length for o in on_warp] == [o.length for o in on_c], gym_id
    ret_w = np.array([o.ret for o in on_warp])
    ret_c = np.array([o.ret for o in on_c])
    rel = np.abs(ret_w - ret_c) / np.maximum(np.abs(ret_c), 1.0)
    assert rel.max() <= rtol, (gym_id, rel.max(), ret_w, ret_c)


@pytest.mark.parametrize("gym_id", sorted(SHORT))
def test_short_episodes_match_the_c_kind(executor: LocalExecutor, gym_id: str) -> None:
    steps, rtol = SHORT[gym_id]
    _check(gym_id, *_both(executor, gym_id, steps, ENVS), rtol)


def test_a_non_finite_action_is_the_submissions_fault(executor: LocalExecutor) -> None:
    task = family_task("InvertedPendulum-v5", STEPS)
    bad = weights(task)
    bad["l3.bias"][:] = np.nan
    with pytest.raises(PolicyFault, match="action"):
        executor.run(task, bad, [s for _, s in _hidden(task, 2)])


def test_the_result_names_the_engine_and_device(executor: LocalExecutor) -> None:
    used = engine_used(family_task("InvertedPendulum-v5", STEPS))
    assert used is not None
    assert used.name == "mujoco-warp" and used.device == "cpu" and used.label == "mujoco-warp/cpu"
    assert used.versions["mujoco-warp"] == "4.0.0" and used.versions["mujoco"].startswith("4.")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("gym_id", "steps"),
    [("Reacher-v5", 50), ("InvertedDoublePendulum-v5", 1000), ("Walker2d-v5", 1000)],
)
def test_whole_episodes_match_the_c_kind(executor: LocalExecutor, gym_id: str, steps: int) -> None:
    """Reacher's whole 50-step episodes; InvertedDoublePendulum's and Walker2d's to their
    end (a random policy falls within some dozens of steps): same terminations, returns
    within :data:`WHOLE`."""
    _check(gym_id, *_both(executor, gym_id, steps, 16), WHOLE)


@pytest.mark.slow
def test_the_bundled_task_with_the_shipped_checkpoint_matches_the_c_task(
    executor: LocalExecutor,
) -> None:
    """td3-inverted-pendulum-warp-v1 against td3-inverted-pendulum-v2 (the C kind), the
    demo's checkpoint, whole 1000-step episodes on the same hidden seeds: every return
    is the same (the pole stays up in both)."""
    from safetensors.numpy import load_file

    from ale_robotics.tasks import default_registry

    reg = default_registry()
    warp, c = reg.get("td3-inverted-pendulum-warp-v1"), reg.get("td3-inverted-pendulum-v2")
    assert warp.eval.base_seeds == c.eval.base_seeds
    w = load_file(str(CHECKPOINT))
    runs = [(s.index, s.value) for s in derive_seeds(warp.eval.base_seeds, "run-ckpt", SECRET)]
    on_warp = executor.run(warp, w, [s for _, s in runs], indices=[i for i, _ in runs])
    on_c = rollout_episodes(c, w, runs)
    assert [o.ret for o in on_warp] == [o.ret for o in on_c] == [1000.0] * len(runs)
