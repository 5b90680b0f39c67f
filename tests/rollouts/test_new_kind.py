"""A rollout kind registered by a distribution we did not ship works end to end, no file changed.

The kind lives in a tiny installed "distribution" made in a temp dir (a module and a
``.dist-info`` with its ``entry_points.txt``, put on ``sys.path``): exactly what a
third-party package, or a new kind of ours, adds. It subclasses the gymnasium kind, so its
episodes must be the gymnasium kind's, bit for bit. Nothing in the task model, the
pipeline, the plan or the result lists kinds, so all of them accept it; and a result
naming it stops parsing once it is uninstalled (kind names are checked, never guessed).
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from helpers import random_weights

from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.batch.plan import episode_plan
from ale_robotics.evaluator.batch.smoke import smoke_task
from ale_robotics.model import kind_registry as registry
from ale_robotics.model.kind_registry import get_kind, kind_names
from ale_robotics.model.outcomes import (
    BatchOutcomes,
    RolloutOutcomes,
    batch_outcomes,
    episode_outcomes,
)
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskSpec, default_registry

MODULE = "ale_test_mirror_kind"
NAME = "gym_mirror"

KIND_SOURCE = f'''
from ale_robotics.rollouts.gymnasium import GymnasiumKind


class MirrorKind(GymnasiumKind):
    """The gymnasium kind under another name, counting its shards."""

    name = "{NAME}"
    shards = 0

    def run_shard(self, task, artifact, seeds, on_episode=None):
        type(self).shards += 1
        return super().run_shard(task, artifact, seeds, on_episode)


class Misnamed(GymnasiumKind):
    name = "not_its_entry_point"


NOT_A_KIND = object()
'''


def _install(site: Path, entry_points: str) -> None:
    (site / f"{MODULE}.py").write_text(textwrap.dedent(KIND_SOURCE))
    dist = site / "ale_test_mirror_kind-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ale-test-mirror-kind\nVersion: 0.0\n"
    )
    (dist / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{entry_points}")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path for the fake distribution; everything undone afterwards."""
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    registry.clear_cache()
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(MODULE, None)
        importlib.invalidate_caches()
        registry.clear_cache()


@pytest.fixture
def mirror(site: Path) -> Path:
    _install(site, f"{NAME} = {MODULE}:MirrorKind\n")
    return site


def _task_as(name: str) -> TaskSpec:
    doc: dict[str, Any] = json.loads(default_registry().entry("td3-inverted-pendulum-v2").raw)
    doc["eval"]["backend"] = name
    doc["eval"].pop("threads", None)  # the task's mujoco_rollout setting: not this kind's
    return TaskSpec.model_validate(doc)


def test_a_kind_from_an_entry_point_runs_through_the_pipeline(mirror: Path) -> None:
    assert NAME in kind_names()
    task = _task_as(NAME)
    reference = _task_as("gymnasium")
    assert (
        task.eval.rollout == NAME and json.loads(task.model_dump_json())["eval"]["backend"] == NAME
    )
    weights = random_weights(task, seed=4, scale=0.3)
    hidden = derive_seeds(task.eval.base_seeds, "run-mirror", bytes(32))
    plan = episode_plan(task, hidden)
    assert plan == episode_plan(reference, hidden) and len(plan) == task.eval.evaluated_episodes
    seen: list[int] = []
    out = rollout_episodes(task, weights, plan[:3], lambda o: seen.append(o.index))
    shards: int = vars(type(get_kind(NAME)))["shards"]
    assert shards == 1
    assert out == rollout_episodes(reference, weights, plan[:3]) and sorted(seen) == [0, 1, 2]
    small = smoke_task(task, 2)
    assert small.eval.rollout == NAME and small.eval.episodes == 2
    # its outcomes are rollout episodes, stored under its name, read back as such
    record = batch_outcomes(NAME, task.eval.base_seeds, out)
    assert isinstance(record, RolloutOutcomes) and record.backend == NAME
    stored = record.model_dump(mode="json")
    again = pydantic.TypeAdapter[Any](BatchOutcomes).validate_python(stored)
    assert again == record and episode_outcomes(again) == out


def test_a_result_naming_an_uninstalled_kind_does_not_parse(mirror: Path) -> None:
    stored = RolloutOutcomes.from_episodes(NAME, []).model_dump(mode="json")
    sys.path.remove(str(mirror))
    try:
        registry.clear_cache()
        with pytest.raises(pydantic.ValidationError, match="not a registered rollout kind"):
            pydantic.TypeAdapter[Any](BatchOutcomes).validate_python(stored)
        with pytest.raises(ValueError, match=f"eval.backend '{NAME}' is not a registered"):
            _task_as(NAME)
    finally:
        sys.path.insert(0, str(mirror))


def test_outcomes_of_other_records_are_not_rollout_episodes() -> None:
    with pytest.raises(pydantic.ValidationError, match="planning records"):
        RolloutOutcomes(backend="planner", episodes=[])
    with pytest.raises(pydantic.ValidationError, match="outcomes need a 'backend'"):
        pydantic.TypeAdapter[Any](BatchOutcomes).validate_python({"episodes": []})


def test_an_entry_point_must_be_named_as_its_kind(site: Path) -> None:
    _install(site, f"misnamed = {MODULE}:Misnamed\nbroken = {MODULE}:NOT_A_KIND\n")
    with pytest.raises(ValueError, match="gives a kind named 'not_its_entry_point'"):
        get_kind("misnamed")
    with pytest.raises(TypeError, match="not a RolloutKind subclass or instance"):
        get_kind("broken")


def test_two_distributions_cannot_claim_one_name(site: Path) -> None:
    _install(site, f"gymnasium = {MODULE}:MirrorKind\n")
    with pytest.raises(ValueError, match="'gymnasium' is registered twice"):
        kind_names()
