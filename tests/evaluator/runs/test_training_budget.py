"""Training budgets in agent steps, counted over a run's practice sessions and enforced.

The counts live in the job store: replicas sharing it (each with a state dir of its
own here, as on different hosts) charge one counter per run and enforce one budget.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pg import pg_cluster
from stores import Backend, backend

from ale_robotics.errors import ResourceExhaustedError
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.tasks import Registry, TaskSpec, default_registry, load_manifest
from ale_robotics.tasks.manifest import ReleaseManifest

TASK = "td3-hopper-v1"
RUN = "run-budget-1"
PRACTICE, EVAL = SessionKind.PRACTICE, SessionKind.EVAL

__all__ = ["backend", "pg_cluster"]


def _manifest(**budgets: int) -> ReleaseManifest:
    data = json.loads(load_manifest().model_dump_json())
    for task_id, steps in budgets.items():
        data["tasks"][task_id]["compute_budget"]["training_steps"] = steps
    return ReleaseManifest.model_validate(data)


def _registry(budget: int) -> Registry:
    raw = default_registry().entry(TASK).raw  # the shipped bytes: the manifest hash holds
    return Registry({"hopper.json": raw}, _manifest(**{TASK: budget}))


MakeEv = Callable[..., Evaluator]


@pytest.fixture
def make_ev(tmp_path: Path) -> Iterator[MakeEv]:
    made: list[Evaluator] = []

    def make(budget: int = 10, state: str = "state", **config: Any) -> Evaluator:
        cfg = EvaluatorConfig(tmp_path / state, None, workers=1, **config)
        ev = Evaluator(cfg, _registry(budget))
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.stop()


def _task(ev: Evaluator) -> TaskSpec:
    return ev.task(TASK)


def _open(ev: Evaluator, kind: SessionKind = PRACTICE, n: int = 1, run: str = RUN) -> Session:
    return ev.sessions.open(_task(ev), kind, n, run)


def _zeros(s: Session) -> np.ndarray:
    return np.zeros(s.action_shape, dtype=s.action_dtype)


def test_every_practice_session_of_a_run_counts_and_the_refusal_names_the_budget(
    make_ev: MakeEv,
) -> None:
    ev = make_ev(budget=10)
    a, b = _open(ev, n=3), _open(ev, n=1)
    a.reset([0])
    b.reset([1])
    for _ in range(2):
        a.step(_zeros(a))  # 6
    for _ in range(3):
        b.step(_zeros(b))  # 9
    before = a._obs.copy()
    with pytest.raises(ResourceExhaustedError) as err:
        a.step(_zeros(a))  # would be 12
    message = str(err.value)
    for part in (
        f"run {RUN} has taken 9 of its 10 agent steps",
        "compute_budget.training_steps = 10 agent steps",
        "one agent step = one env of one Step call",
        "would make it 12, so it is refused",
    ):
        assert part in message, message
    assert np.array_equal(a._obs, before)  # refused before any env moved
    b.step(_zeros(b))  # exactly the budget: fine
    assert ev.training.used(RUN) == 10
    with pytest.raises(ResourceExhaustedError, match="used up, so this Reset is refused"):
        b.reset([0])
    with pytest.raises(ResourceExhaustedError, match="10 of its 10"):
        b.step(_zeros(b))


def test_eval_sessions_other_runs_and_run_less_sessions_are_not_charged(
    make_ev: MakeEv,
) -> None:
    ev = make_ev(budget=2)
    p = _open(ev)
    p.reset([0])
    p.step(_zeros(p))
    p.step(_zeros(p))
    other = _open(ev, run="run-budget-2")
    other.reset([0])
    other.step(_zeros(other))  # its own budget
    free = ev.sessions.open(_task(ev), PRACTICE, 1, "")  # no run: nothing to charge
    free.reset([0])
    for _ in range(5):
        free.step(_zeros(free))
    e = _open(ev, EVAL, n=2)
    e.reset([])
    for _ in range(5):
        e.step(_zeros(e))  # evaluation is not training
    assert (ev.training.used(RUN), ev.training.used("run-budget-2")) == (2, 1)
    assert ev.training.used("") == 0


def test_the_eval_result_and_signed_events_carry_the_count(make_ev: MakeEv) -> None:
    ev = make_ev(budget=50, smoke_episodes=1)
    p = _open(ev, n=4)
    p.reset([0])
    for _ in range(3):
        p.step(_zeros(p))
    e = _open(ev, EVAL)
    p.step(_zeros(p))  # practice while the eval session is open counts too
    ev.sessions.close(e.id)
    res = ev.result("", RUN)
    assert res.training is not None
    assert res.training.agent_steps == 16 and res.training.agent_steps_budget == 50
    assert (res.training.budget_steps, res.training.unit) == (50, "agent_step")
    assert res.training.enforced and res.training.summary() == "trained 16 / 50 agent steps"
    events = [x["payload"] for x in res.events if x["kind"] == "training_steps"]
    assert [(x["phase"], x["agent_steps"]) for x in events] == [
        ("eval_session_opened", 12),
        ("eval_session_ended", 16),
    ]
    assert all(x["agent_steps_budget"] == 50 for x in events)


def test_the_count_survives_a_restart(make_ev: MakeEv) -> None:
    old = make_ev(budget=5)
    s = _open(old, n=2)
    s.reset([0])
    s.step(_zeros(s))
    s.step(_zeros(s))
    old.sessions.close(s.id)  # a close writes the counts
    new = make_ev(budget=5)  # same state dir
    assert new.training.used(RUN) == 4
    t = _open(new, n=2)
    t.reset([0])
    with pytest.raises(ResourceExhaustedError, match="4 of its 5 agent steps"):
        t.step(_zeros(t))


def test_replicas_on_one_store_share_a_runs_budget(make_ev: MakeEv, backend: Backend) -> None:
    """Replica A and replica B (different state dirs: different hosts; with the same
    secret and key, as the store demands of its replicas) serve practice sessions of one
    run: B sees A's steps, refuses what would pass the budget, and a restarted replica
    keeps the count; no file in either state dir holds it."""
    a = make_ev(budget=10, state="a", store_url=backend.url)
    for other in ("b", "c"):
        _same_keys(a.state.root, a.state.root.parent / other)
    b = make_ev(budget=10, state="b", store_url=backend.url)
    sa, sb = _open(a, n=3), _open(b, n=2)
    sa.reset([0])
    sb.reset([0])
    sa.step(_zeros(sa))
    sa.step(_zeros(sa))  # 6, on A
    assert b.training.used(RUN) == 6
    sb.step(_zeros(sb))  # 8, on B
    with pytest.raises(ResourceExhaustedError, match="8 of its 10 agent steps"):
        sa.step(_zeros(sa))  # would be 11
    sb.step(_zeros(sb))  # exactly 10
    with pytest.raises(ResourceExhaustedError, match="used up, so this Reset is refused"):
        sa.reset([0])
    b.sessions.close(sb.id)
    assert make_ev(budget=10, state="c", store_url=backend.url).training.used(RUN) == 10
    assert not (a.state.root / "practice_steps.json").exists()
    assert not (b.state.root / "practice_steps.json").exists()


def _same_keys(src: Path, dst: Path) -> None:
    """Give state dir ``dst`` the secret and signing key of ``src`` (a copied volume)."""
    dst.mkdir()
    for name in ("secret", "signing_key.pem"):
        (dst / name).write_bytes((src / name).read_bytes())
        (dst / name).chmod(0o600)


def test_budgets_in_the_papers_unit_and_in_agent_steps() -> None:
    from ale_robotics.tasks.registry import budget_for
    from ale_robotics.tasks.spec import TrainingStepUnit

    reg = default_registry()
    hopper = reg.training_budget(TASK)
    assert hopper is not None and hopper.enforced
    assert (hopper.steps, hopper.unit, hopper.action_repeat) == (
        1_000_000,
        TrainingStepUnit.AGENT_STEP,
        1,
    )
    assert hopper.agent_steps == 1_000_000
    assert hopper.describe().startswith("1,000,000 agent steps; an agent step is one env")
    cheetah_id = "tdmpc2-cheetah-run-v1"
    cheetah = budget_for(reg.get(cheetah_id), reg.manifest_entry(cheetah_id))
    assert cheetah is not None and cheetah.action_repeat == 2
    # TD-MPC2 counts agent steps (manifest note): 100k of them, 200k dm_control steps
    assert cheetah.agent_steps == cheetah.steps == 100_000
    assert "(200,000 dm_control simulator steps" in cheetah.describe()
    sim = reg.get(cheetah_id)
    assert sim.session is not None
    sim_session = sim.session.model_copy(
        update={"training_step_unit": TrainingStepUnit.SIMULATOR_STEP}
    )
    counted = budget_for(
        sim.model_copy(update={"session": sim_session}), reg.manifest_entry(cheetah_id)
    )
    assert counted is not None and counted.agent_steps == 50_000
    assert "100,000 simulator steps = 50,000 agent steps at action repeat 2" in counted.describe()
    batch = "td3-inverted-pendulum-v1"
    declared = budget_for(reg.get(batch), reg.manifest_entry(batch))
    assert declared is not None and not declared.enforced
    assert "declared, not counted" in declared.describe()
    assert budget_for(reg.get("edmp-v1"), reg.manifest_entry("edmp-v1")) is None
