"""The registry of rollout kinds: entry points, lazy loading, clear errors, no import cycle."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.model import kind_registry as registry
from ale_robotics.model.kind_registry import ENTRY_POINT_GROUP, get_kind, kind_names
from ale_robotics.tasks import TaskSpec, default_registry

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_kinds_are_the_ones_pyproject_declares() -> None:
    """A stale install (``pip install -e .`` not re-run) would miss a kind: say so here."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert kind_names() == sorted(declared[ENTRY_POINT_GROUP])


def test_an_unknown_kind_lists_the_registered_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown rollout kind 'no-such-kind'; registered kinds: .*'gymnasium'"
    ):
        get_kind("no-such-kind")


def test_a_task_config_naming_an_unknown_kind_is_refused_clearly() -> None:
    doc: dict[str, Any] = json.loads(default_registry().entry("td3-inverted-pendulum-v2").raw)
    doc["eval"]["backend"] = "no-such-kind"
    with pytest.raises(
        ValueError, match=r"eval\.backend 'no-such-kind' is not a registered rollout kind"
    ):
        TaskSpec.model_validate(doc)
    # the Python name is never a key of the config: only "backend" is read and written
    doc["eval"].pop("backend")
    doc["eval"]["rollout"] = "gymnasium"
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        TaskSpec.model_validate(doc)


def test_the_config_key_stays_backend() -> None:
    task = default_registry().get("fetch-pickplace-trajset-v1")
    assert task.eval.rollout == "replay"
    dumped = json.loads(task.model_dump_json())
    assert dumped["eval"]["backend"] == "replay" and "rollout" not in dumped["eval"]
    assert task.model_dump(mode="json")["eval"]["backend"] == "replay"


def test_names_and_the_task_model_load_no_kind() -> None:
    """kind_names reads metadata only, and importing the task model imports neither a kind
    nor the evaluator (the registry sits below both, in ale_robotics.model)."""
    code = (
        "import sys\n"
        "import ale_robotics.tasks.spec\n"
        "from ale_robotics.model.kind_registry import kind_names\n"
        "assert 'gymnasium' in kind_names()\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('ale_robotics.rollouts.',"
        " 'ale_robotics.evaluator')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "[]"


def test_clear_cache_forgets_loaded_kinds() -> None:
    first = get_kind("gymnasium")
    registry.clear_cache()
    again = get_kind("gymnasium")
    assert again is not first and type(again) is type(first)
