"""Over every interactive task: abandoning an eval episode scores exactly what playing the
task's null action scores (docs/architecture.md#rules-a-score-must-obey,
"doing less never pays").

Two evaluators share one secret and serve the same run id, so both play the same hidden
seeds; smoke budgets (2 episodes, as ``ale-robotics run --episodes 2``) keep it short.
One agent takes a single null-action step and closes its eval session; the other plays
the null action to the end of every episode. Their metrics, episodes and scores must be
identical, and the first one's episodes say they were abandoned.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.model.result import EvalResult
from ale_robotics.scoring import score
from ale_robotics.seeds import new_secret
from ale_robotics.tasks import TaskMode, default_registry

REG = default_registry()
INTERACTIVE = [e.spec.id for e in REG if e.spec.mode is TaskMode.INTERACTIVE]
RUN = "run-abandon-1"
EPISODES = 2


def _evaluator(root: Path, secret: bytes, task_id: str) -> Evaluator:
    (root / "state").mkdir(parents=True)
    (root / "state" / "secret").write_bytes(secret)
    config = EvaluatorConfig(root / "state", None, workers=1, smoke_episodes=EPISODES)
    return Evaluator(config, REG)


def _play(ev: Evaluator, task_id: str, stop_after: int | None) -> EvalResult:
    """Null actions on 2 envs; ``stop_after`` Steps then CloseSession (None: to the end)."""
    task = ev.task(task_id)
    s: Session = ev.sessions.open(task, SessionKind.EVAL, EPISODES, RUN)
    null = np.broadcast_to(s.null_action, s.action_shape).copy()
    s.reset([])
    steps = 0
    while not s.eval_complete and (stop_after is None or steps < stop_after):
        s.step(null)
        steps += 1
    ev.sessions.close(s.id)
    return ev.result("", RUN)


@pytest.mark.parametrize("task_id", INTERACTIVE)
def test_abandoning_after_one_step_scores_what_the_null_action_scores(
    tmp_path: Path, task_id: str
) -> None:
    secret = new_secret()
    quitter = _evaluator(tmp_path / "a", secret, task_id)
    player = _evaluator(tmp_path / "b", secret, task_id)
    try:
        left = _play(quitter, task_id, stop_after=1)
        played = _play(player, task_id, stop_after=None)
    finally:
        quitter.stop()
        player.stop()
    assert left.state == played.state == "SUCCEEDED", left.failure_reason
    assert left.metrics == played.metrics
    strip = {"abandoned", "agent_steps"}
    assert [e.model_dump(exclude=strip) for e in left.episodes] == [
        e.model_dump(exclude=strip) for e in played.episodes
    ]
    assert all(e.abandoned and e.agent_steps == 1 for e in left.episodes)
    assert not any(e.abandoned for e in played.episodes)
    assert all(e.agent_steps == e.length for e in played.episodes)
    task, target = REG.get(task_id), REG.target(task_id)
    a, b = score(task, left.metrics, target), score(task, played.metrics, target)
    assert (a.status, a.score) == (b.status, b.score)
