"""Results of different engines are ranked apart, unless the task says they are comparable.

A task of a kind that runs in an engine environment can be measured on different devices
(MuJoCo Warp on a CPU, on a GPU) whose float results need not agree: each engine and
device gets a board of its own within the task. A task whose config declares
``eval.engines_comparable`` ranks them together; runs of the evaluator's own engine (no
engine label) rank as before.
"""

from __future__ import annotations

import json

import pytest
from test_leaderboard import _run

import ale_robotics.tasks
from ale_robotics.runs import leaderboard
from ale_robotics.tasks import Registry, default_registry

WARP = "td3-inverted-pendulum-warp-v1"


def test_each_engine_and_device_is_a_board_of_its_own() -> None:
    runs = [
        _run(1, WARP, "a", 1.0, engine="mujoco-warp/cpu"),
        _run(2, WARP, "b", 0.9, engine="mujoco-warp/cuda:0"),
        _run(3, WARP, "c", 0.8, engine="mujoco-warp/cpu"),
        _run(4, "td3-inverted-pendulum-v2", "d", 0.7),
    ]
    rows = leaderboard(runs)
    assert [(r.board, r.rank, r.label) for r in rows] == [
        ("td3-inverted-pendulum-v2", 1, "d"),
        (f"{WARP} on mujoco-warp/cpu", 1, "a"),
        (f"{WARP} on mujoco-warp/cpu", 2, "c"),
        (f"{WARP} on mujoco-warp/cuda:0", 1, "b"),
    ]
    # one label's runs on two engines are two rows, each counting its own runs
    both = leaderboard([*runs, _run(5, WARP, "a", 0.5, engine="mujoco-warp/cuda:0")])
    assert [(r.board, r.label, r.runs) for r in both if r.label == "a"] == [
        (f"{WARP} on mujoco-warp/cpu", "a", 1),
        (f"{WARP} on mujoco-warp/cuda:0", "a", 1),
    ]


def test_a_task_that_says_its_engines_are_comparable_ranks_them_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = json.loads(default_registry().entry(WARP).raw)
    doc["eval"]["engines_comparable"] = True
    comparable = Registry({f"{WARP}.json": json.dumps(doc).encode()})
    monkeypatch.setattr(ale_robotics.tasks, "default_registry", lambda: comparable)
    rows = leaderboard(
        [
            _run(1, WARP, "a", 1.0, engine="mujoco-warp/cpu"),
            _run(2, WARP, "b", 0.9, engine="mujoco-warp/cuda:0"),
        ]
    )
    assert [(r.board, r.rank, r.label) for r in rows] == [(WARP, 1, "a"), (WARP, 2, "b")]
