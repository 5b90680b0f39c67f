"""An interactive task's floor: an eval session abandoned before its first step.

Real evaluator, real MuJoCo (InvertedDoublePendulum, 10 hidden-seed episodes). Doing
nothing must score exactly the floor; the floor must not depend on what the agent did,
must leave the run's own record alone, and is signed in its result event.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.sessions.floor import measure_floor
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import derive_seeds, new_secret
from ale_robotics.tasks import default_registry

TASK = "td3-inverted-double-pendulum-v1"
RUN = "run-floor"
SECRET = new_secret()


def _evaluator(tmp_path: Path, name: str) -> Evaluator:
    state = tmp_path / name
    state.mkdir()
    (state / "secret").write_bytes(SECRET)  # every evaluator here: the same hidden seeds
    return Evaluator(EvaluatorConfig(state, None, workers=1), default_registry())


@pytest.fixture
def evaluators(tmp_path: Path) -> Iterator[list[Evaluator]]:
    made: list[Evaluator] = []
    yield made
    for ev in made:
        ev.stop()


def _play(ev: Evaluator, action: float | None) -> EvalResult:
    """An eval session played to its end with ``action`` every step (None: closed at once)."""
    s = ev.sessions.open(ev.task(TASK), SessionKind.EVAL, 2, RUN)
    if action is not None:
        s.reset([])
        while not s.eval_complete:
            s.step(np.full(s.action_shape, action, s.action_dtype))
    ev.sessions.close(s.id)
    return ev.result("", RUN)


def test_doing_nothing_scores_exactly_the_floor_whatever_the_agent_did(
    tmp_path: Path, evaluators: list[Evaluator]
) -> None:
    results = {}
    for name, action in (("null", 0.0), ("abandon", None), ("push", 0.3)):
        ev = _evaluator(tmp_path, name)
        evaluators.append(ev)
        results[name] = _play(ev, action)
    null, abandoned, push = results["null"], results["abandon"], results["push"]
    assert null.state == abandoned.state == push.state == "SUCCEEDED"
    assert null.floor is not None and null.floor.policy == "null_action"
    # the floor is what playing the null action, or abandoning, measures
    assert null.floor.metrics == null.metrics == abandoned.metrics
    assert null.floor.episode_returns == [e.episode_return for e in null.episodes]
    # and the same for an agent that did something else: the task's and the seeds'
    assert push.floor == abandoned.floor == null.floor
    assert push.metrics != null.metrics


def test_the_floor_leaves_the_run_record_alone_and_is_signed(
    tmp_path: Path, evaluators: list[Evaluator]
) -> None:
    ev = _evaluator(tmp_path, "record")
    evaluators.append(ev)
    result = _play(ev, 0.3)
    events = ev.ledger.events(RUN)
    kinds = [e["kind"] for e in events]
    assert kinds.count("session_opened") == 1  # the floor's session opened no record
    assert kinds.count("episode_summary") == ev.task(TASK).eval.episodes
    (signed,) = [e["payload"]["floor"] for e in events if e["kind"] == "result"]
    assert result.floor is not None and signed == result.floor.model_dump(mode="json")
    assert ev.store.count_for_run(RUN) == 1  # nor a job row
    assert ev.store.practice_steps(RUN) == 0  # nor practice steps


def test_a_floor_whose_envs_fail_is_a_note() -> None:
    task = default_registry().get(TASK)
    broken = task.model_copy(update={"env": task.env.model_copy(update={"gym_id": "NoSuchEnv-v0"})})
    seeds = derive_seeds(task.eval.base_seeds, RUN, SECRET)
    floor, note = measure_floor(broken, seeds)
    assert floor is None and note.startswith("the floor could not be measured:")
    assert "NoSuchEnv" in note
