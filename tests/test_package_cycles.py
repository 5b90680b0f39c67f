"""No import cycle between the parts of ale_robotics (scripts/check_package_cycles.py).

``make lint`` runs the script too; this test makes a plain ``pytest`` run catch a cycle,
and checks that the checker finds and names one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_package_cycles", ROOT / "scripts" / "check_package_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_no_cycle_between_the_parts_of_the_package() -> None:
    assert _checker().package_cycles("ale_robotics") == []


def test_the_model_layer_imports_nothing_of_ours() -> None:
    edges, examples = _checker().part_graph("ale_robotics")
    assert edges["model"] == set(), [examples[("model", b)] for b in sorted(edges["model"])]


def test_a_cycle_is_found_and_named() -> None:
    find = _checker().find_cycles
    edges = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"e"}}
    assert find(edges) == [["a", "b", "c", "a"]]
    assert find({"x": {"y"}, "y": set()}) == []
