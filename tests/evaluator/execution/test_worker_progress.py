"""A worker's progress reports: coalesced in time, never lost (unit level: the shard faked)."""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

import pytest

from ale_robotics.evaluator.execution import worker_process
from ale_robotics.evaluator.execution.weights_handoff import published
from ale_robotics.model.episode import EpisodeOutcome


def _run(monkeypatch: pytest.MonkeyPatch, episodes: int, every_s: float) -> list[Any]:
    sent: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def fake_shard(
        task_json: str, weights: Any, seeds: Any, report: Callable[[], None]
    ) -> list[EpisodeOutcome]:
        out = []
        for i, _ in seeds:
            report()
            out.append(EpisodeOutcome(i, 1.0, 1, True))
        return out

    monkeypatch.setattr(worker_process, "run_shard", fake_shard)
    monkeypatch.setattr(worker_process, "_PROGRESS", sent)
    monkeypatch.setattr(worker_process, "PROGRESS_EVERY_S", every_s)
    with published({}) as weights:
        outcomes = worker_process.run_shard_in_worker(
            "t", "{}", weights, [(i, i) for i in range(episodes)]
        )
    assert [o.index for o in outcomes] == list(range(episodes))
    got = []
    while not sent.empty():
        got.append(sent.get())
    return got


def test_a_fast_shard_reports_its_episodes_in_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _run(monkeypatch, 500, every_s=60.0)
    assert got[0] == ("t", 500)
    assert got[1][0] == "t:shard" and got[1][1] >= 0
    assert len(got) == 2


def test_without_coalescing_every_episode_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _run(monkeypatch, 50, every_s=0.0)
    counts = [n for tag, n in got if tag == "t"]
    assert counts == [1] * 50
    assert got[-1][0] == "t:shard"
