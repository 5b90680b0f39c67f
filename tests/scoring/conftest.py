"""Tasks, targets and submission evidence shared by the scoring tests.

Three tasks cover the scoring rules: the bundled TD3 benchmark (higher is
better, real manifest target), a small lower-is-better interactive task with a
safety and a condition metric, and a reproduction-genre copy of TD3 with a
faithfulness gate. Fixtures are session-scoped (the models are frozen) so that
hypothesis tests can use them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# As tests/hardening does: only tests/ is on sys.path, so this directory goes there too
# for the test modules' ``import gate_helpers``.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from gate_helpers import EVALUATOR, HARNESS

from ale_robotics.scoring import EvaluatorEvidence, GateEvidence, HarnessEvidence
from ale_robotics.tasks import Direction, PaperTarget, TargetSource, TaskSpec, default_registry
from ale_robotics.tasks.manifest import Comparability, Setup, Statistic

TD3_ID = "td3-inverted-pendulum-v1"

SOURCE = TargetSource(paper="Doe et al. 2020", location="Table 2")

COMPARABILITY = Comparability(
    paper=Setup(env="Reacher-v1 (gym)", simulator="MuJoCo 1.31"),
    ours=Setup(env="Reacher-v5 (Gymnasium)", simulator="MuJoCo 3.3.0"),
    notes=["The simulator changed."],
)

COST_TASK: dict[str, Any] = {
    "id": "reach-cost-v1",
    "title": "Reach with few collisions",
    "description": "A lower-is-better task with a safety and a condition metric.",
    "mode": "interactive",
    "session": {},
    "simulator": {"name": "mujoco", "package": "mujoco"},
    "env": {"gym_id": "Reacher-v5", "max_episode_steps": 50},
    "paper": {"title": "A paper", "authors": "Doe", "year": 2020},
    "metrics": [
        {"name": "final_distance", "direction": "lower_is_better", "role": "primary"},
        {"name": "collision_rate", "direction": "lower_is_better", "role": "safety"},
        {"name": "success_rate", "direction": "higher_is_better", "role": "condition"},
        {"name": "episode_length", "direction": "higher_is_better", "role": "report"},
    ],
    "eval": {"episodes": 2, "base_seeds": [1, 2]},
    "scoring": {
        "safety": [{"metric": "collision_rate", "tolerance": 0.2, "kind": "linear"}],
        "conditions": [{"metric": "success_rate", "threshold": 0.5, "direction": "at_least"}],
    },
}

GATE: dict[str, Any] = {
    "checks": [
        {"kind": "architecture"},
        {"kind": "algorithm_allowlist", "allowed": ["TD3"]},
        {"kind": "budget", "max_steps": 1_000_000},
        {"kind": "learning_curve", "min_points": 3},
    ]
}

META = {"algorithm": "TD3", "training_steps": 1_000_000, "final_eval_return": 1000.0}
CURVE = "step,eval_return\n5000,120.5\n500000,870.0\n1000000,1000.0\n"


def target(
    value: float,
    direction: Direction = Direction.HIGHER_IS_BETTER,
    metric: str = "mean_return",
) -> PaperTarget:
    """A sourced paper target (tests build their own instead of relying on a manifest)."""
    return PaperTarget(
        metric=metric,
        value=value,
        direction=direction,
        source=SOURCE,
        statistic=Statistic.FINAL_AT_BUDGET,
        comparability=COMPARABILITY,
    )


@pytest.fixture(scope="session")
def make_target() -> Callable[..., PaperTarget]:
    return target


@pytest.fixture(scope="session")
def td3() -> TaskSpec:
    return default_registry().get(TD3_ID)


@pytest.fixture(scope="session")
def td3_target() -> PaperTarget:
    found = default_registry().target(TD3_ID)
    assert found is not None
    return found


@pytest.fixture(scope="session")
def cost_task() -> TaskSpec:
    return TaskSpec.model_validate(COST_TASK)


@pytest.fixture(scope="session")
def repro_task() -> TaskSpec:
    data = json.loads(default_registry().entry(TD3_ID).raw)
    data["id"] = "td3-repro-v1"
    data["genre"] = "reproduction"
    data["scoring"] = {"gate": GATE}
    return TaskSpec.model_validate(data)


@pytest.fixture(scope="session")
def td3_shapes(td3: TaskSpec) -> dict[str, list[int]]:
    assert td3.contract is not None
    return {t.key: list(t.shape) for t in td3.contract.tensors}


@pytest.fixture
def make_evidence(tmp_path: Path, td3_shapes: dict[str, list[int]]) -> Callable[..., GateEvidence]:
    """Write meta.json / curve.csv (raw text or bytes allowed) and return evidence over them.

    ``meta=None`` or ``curve=None`` leaves that file out; ``shapes`` overrides the
    policy's tensor shapes (default: the TD3 contract's, which pass); ``evaluator``
    and ``harness`` override what the evaluator and the harness observed (default:
    a faithful run, :data:`EVALUATOR` and :data:`HARNESS`; None: nothing observed).
    """

    def build(
        meta: dict[str, Any] | str | bytes | None = META,
        curve: str | bytes | None = CURVE,
        shapes: dict[str, list[int]] | str | None = "default",
        evaluator: EvaluatorEvidence | None = EVALUATOR,
        harness: HarnessEvidence | None = HARNESS,
    ) -> GateEvidence:
        files: dict[str, Path] = {}
        for name, content in (("meta.json", meta), ("curve.csv", curve)):
            if content is None:
                continue
            path = tmp_path / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            elif isinstance(content, str):
                path.write_text(content, encoding="utf-8")
            else:
                path.write_text(json.dumps(content), encoding="utf-8")
            files[name] = path
        chosen = td3_shapes if isinstance(shapes, str) else shapes
        return GateEvidence(files=files, tensor_shapes=chosen, evaluator=evaluator, harness=harness)

    return build
