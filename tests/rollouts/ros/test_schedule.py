"""The hold schedule (rollouts/ros/schedule.py): its runs, and the episode it implies.

No graph here: these pin what the graph's episodes are compared with (``replay_episode``),
against the ``gymnasium`` kind's own loop.
"""

from __future__ import annotations

import pytest
import ros_support
from hypothesis import given
from hypothesis import strategies as st

from ale_robotics.model.kind_registry import get_kind
from ale_robotics.rollouts.ros.schedule import (
    NULL_COMMAND,
    applied_commands,
    held_steps,
    hold_runs,
    replay_episode,
)


@st.composite
def live_schedules(draw: st.DrawFn) -> list[int]:
    """What a live episode can apply: at each step the newest command received, which is
    never a later step's and never older than the previous step's."""
    n = draw(st.integers(0, 60))
    applied, newest = [], NULL_COMMAND
    for step in range(n):
        newest = draw(st.integers(newest, step))
        applied.append(newest)
    return applied


@given(live_schedules())
def test_runs_give_back_the_schedule(applied: list[int]) -> None:
    runs = hold_runs(applied)
    assert applied_commands(runs, len(applied)) == applied
    assert held_steps(runs) == sum(seq != step for step, seq in enumerate(applied))
    assert all(count >= 1 and seq < first for first, count, seq in runs)


def test_on_time_is_no_run_and_a_dead_controller_one() -> None:
    assert hold_runs(list(range(50))) == []
    # the policy answered steps 0-9, then died: every later step holds command 9
    assert hold_runs([*range(10), *[9] * 40]) == [(10, 40, 9)]
    assert hold_runs([NULL_COMMAND, NULL_COMMAND, 2, 2, 4]) == [(0, 2, -1), (3, 1, 2)]


@pytest.mark.parametrize("applied", [[1], [0, 2], [-2]])
def test_a_command_not_received_before_its_step_is_refused(applied: list[int]) -> None:
    with pytest.raises(ValueError, match="step"):
        hold_runs(applied)


def test_a_run_holding_a_later_command_is_refused() -> None:
    with pytest.raises(ValueError, match="hold run"):
        applied_commands([(3, 2, 5)], 10)


def test_an_on_time_episode_is_the_gymnasium_kind_s() -> None:
    """No run: every step applies its own command, as the gymnasium kind steps one env."""
    task = ros_support.ros_task(200)
    w = ros_support.weights(task, seed=3, scale=0.3)
    gym_task = task.model_copy(
        update={"eval": task.eval.model_copy(update={"rollout": "gymnasium"})}
    )
    for index, seed in ((0, 11), (1, 12)):
        [theirs] = get_kind("gymnasium").run_shard(gym_task, w, [(index, seed)])
        mine = replay_episode(task, w, index, seed, [])
        assert (mine.ret, mine.length, mine.terminated) == (
            theirs.ret,
            theirs.length,
            theirs.terminated,
        )


def test_holding_the_null_command_is_the_zero_policy() -> None:
    """A controller that never answers: every step holds the null command, which is what
    the zero policy (the task's floor) plays."""
    task = ros_support.ros_task(300)
    w = ros_support.weights(task, seed=4, scale=0.3)
    zero = get_kind("ros").null_artifact(task)
    assert zero is not None
    dead = replay_episode(task, w, 0, 21, [(0, 300, NULL_COMMAND)])
    floor = replay_episode(task, zero, 0, 21, [])
    assert (dead.ret, dead.length) == (floor.ret, floor.length)
    assert dead.ret != replay_episode(task, w, 0, 21, []).ret  # the weights do act


def test_a_hold_changes_the_episode_from_that_step() -> None:
    """Holding command 4 at step 5 applies a_4 there: the return differs, and equals the one
    computed by applying the actions by hand."""
    import numpy as np

    from ale_robotics.envs.make import make_env
    from ale_robotics.rollouts.policy import policy_for

    task = ros_support.ros_task(40)
    w = ros_support.weights(task, seed=5, scale=0.3)
    held = replay_episode(task, w, 0, 31, [(5, 1, 4)])
    env = make_env(task.env)
    policy = policy_for(task, w, env.action_space.high)
    obs, _ = env.reset(seed=31)
    actions, ret, steps = [], 0.0, 0
    while True:
        actions.append(policy(obs[None])[0])
        obs, r, term, trunc, _ = env.step(actions[4] if steps == 5 else actions[steps])
        ret, steps = ret + float(r), steps + 1
        if term or trunc:
            break
    assert (held.ret, held.length) == (ret, steps)
    assert held.ret != replay_episode(task, w, 0, 31, []).ret
    assert np.isfinite(ret)
