"""Every target states one final statistic, where it comes from, and what is not comparable.

The TD3 paper has two statistics: Table 1 is the peak over training of the
10-trial average, Table 2 the average of the last 10 evaluations. A task scores
one final policy, so only a final statistic may be a target; values the paper
prints no table for are derived from the authors' published learning curves,
whose per-seed numbers are shipped in ``tasks/data`` (checked here, offline).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ale_robotics.tasks
from ale_robotics.errors import ConfigError
from ale_robotics.tasks import ReleaseManifest, default_registry, load_manifest
from ale_robotics.tasks.manifest import MANIFEST_SCHEMA_VERSION, PaperTarget, Statistic

REPO = Path(__file__).resolve().parents[2]
DATA = Path(ale_robotics.tasks.__file__).parent / "data" / "td3_learning_curves_final.json"
TD3_REPO_COMMIT = "34770ccdcb51df6f6c7d85c1ba7e40d71b940d16"
CLI = [sys.executable, "-m", "ale_robotics"]

# Table 2 of the TD3 paper (TD3 row), the values the curves must reproduce.
TABLE_2 = {"HalfCheetah-v1": 9532.99, "Hopper-v1": 3304.75, "Walker2d-v1": 4565.24}
# Table 1 of the TD3 paper (TD3 column): peak over training, +- std over trials.
TABLE_1 = {
    "InvertedPendulum-v1": ("InvPendulum", 1000.00, 0.00),
    "InvertedDoublePendulum-v1": ("InvDoublePendulum", 9337.47, 14.96),
}


def _targets() -> dict[str, PaperTarget]:
    reg = default_registry()
    found = {i: reg.target(i) for i in reg.ids()}
    return {i: t for i, t in found.items() if t is not None}


def _data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded


def _final_mean(env: dict[str, Any]) -> float:
    per_seed = [float(sum(row)) / len(row) for row in env["last_10_evaluations"]]
    assert len(per_seed) == 10 and all(len(row) == 10 for row in env["last_10_evaluations"])
    return sum(per_seed) / len(per_seed)


def _manifest_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(load_manifest().model_dump_json())
    return data


# -- the invariant over every registered task ------------------------------------------------------


def test_every_target_names_a_final_statistic_and_what_is_not_comparable() -> None:
    targets = _targets()
    assert len(targets) >= 9
    for task_id, t in targets.items():
        assert t.statistic.is_final, task_id
        assert t.statistic in (Statistic.FINAL_LAST_10_EVALUATIONS, Statistic.FINAL_AT_BUDGET)
        c = t.comparability
        assert c.paper.env and c.paper.simulator and c.ours.env and c.ours.simulator, task_id
        assert c.notes and all(n.strip() for n in c.notes), task_id
        assert c.paper.env != c.ours.env, task_id  # the versions differ, and say so
        if t.confidence == "approximate":
            assert t.derivation.strip() and t.source.data_commit, task_id


def _pins(name: str) -> dict[str, str]:
    return dict(
        line.split("==", 1)
        for line in (REPO / "constraints" / name).read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )


def test_our_simulator_versions_are_the_pinned_ones() -> None:
    from ale_robotics.engines import engine_of_kind

    reg = default_registry()
    for task_id, t in _targets().items():
        # a task whose kind runs in an engine environment: that engine's pins
        engine = engine_of_kind(reg.entry(task_id).spec.eval.rollout)
        pins = _pins("dev.txt" if engine is None else engine.constraints)
        assert f"MuJoCo {pins['mujoco'].strip()}" in t.comparability.ours.simulator, task_id
        if task_id.startswith("td3-"):
            assert f"Gymnasium {pins['gymnasium'].strip()}" in t.comparability.ours.env
        if task_id in ("tdmpc2-cheetah-run-v1", "tdmpc2-walker-run-v1"):
            assert f"dm-control {pins['dm_control'].strip()}" in t.comparability.ours.simulator
        if task_id == "tdmpc2-mw-push-v1":
            assert f"metaworld {pins['metaworld'].strip()}" in t.comparability.ours.env


def test_td3_targets_name_versions_and_env_specific_differences() -> None:
    targets = _targets()
    for task_id, t in targets.items():
        if not task_id.startswith("td3-"):
            continue
        assert (
            "-v1" in t.comparability.paper.env and "MuJoCo 1.31" in t.comparability.paper.simulator
        )
        assert "-v5" in t.comparability.ours.env
    notes = {i: " ".join(t.comparability.notes) for i, t in targets.items()}
    assert "friction" in notes["td3-walker2d-repro-v1"]
    assert "after the physics step" in notes["td3-reacher-v1"]
    assert "v2 -> v3" in notes["tdmpc2-mw-push-v1"]
    for base in ("tdmpc2-cheetah-run", "tdmpc2-walker-run", "tdmpc2-mw-push"):
        v1, v2 = f"{base}-v1", f"{base}-v2"
        assert targets[v1].statistic is targets[v2].statistic is Statistic.FINAL_AT_BUDGET
        # the results files count environment steps (the maintainer, and the rows' spacing)
        for task_id in (v1, v2):
            assert "issue #45" in notes[task_id] and "eval_freq" in notes[task_id]
        assert "twice the paper's" in notes[v1] and f"Superseded by {v2}" in notes[v1]
        assert "agent steps at action repeat 2" in notes[v2]
        assert "issue #45" in (targets[v2].derivation or "")


# -- peak statistics are refused -------------------------------------------------------------------


def test_peak_statistic_is_refused_for_a_scored_target() -> None:
    data = _manifest_data()
    data["tasks"]["td3-inverted-double-pendulum-v1"]["target"]["statistic"] = "peak_over_training"
    with pytest.raises(ValueError, match="peak over training: a task scores one final policy"):
        ReleaseManifest.model_validate(data)


def test_target_without_statistic_or_comparability_is_refused() -> None:
    for field in ("statistic", "comparability"):
        data = _manifest_data()
        del data["tasks"]["td3-hopper-v1"]["target"][field]
        with pytest.raises(ValueError, match=rf"(?s)target\.{field}.*Field required"):
            ReleaseManifest.model_validate(data)


def test_approximate_target_needs_its_derivation_and_data_commit() -> None:
    data = _manifest_data()
    data["tasks"]["td3-reacher-v1"]["target"]["derivation"] = " "
    with pytest.raises(ValueError, match="approximate target needs a derivation"):
        ReleaseManifest.model_validate(data)
    data = _manifest_data()
    data["tasks"]["td3-reacher-v1"]["target"]["source"]["data_commit"] = None
    with pytest.raises(ValueError, match="needs the data's commit"):
        ReleaseManifest.model_validate(data)


def test_version_1_manifest_is_refused_naming_its_version(tmp_path: Path) -> None:
    data = _manifest_data()
    assert data["schema_version"] == MANIFEST_SCHEMA_VERSION == 2
    data["schema_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        ConfigError, match="has schema_version 1; this ale-robotics reads schema_version 2"
    ):
        load_manifest(path)


# -- the location strings --------------------------------------------------------------------------


def test_td3_locations_name_the_cell_as_the_tables_lay_it_out() -> None:
    """Table 1 has environments as rows and methods as columns; Table 2 the other way round."""
    seen_table_1: set[str] = set()  # the envs whose Table 1 cell is cited
    reg = default_registry()
    for task_id, t in _targets().items():
        if not task_id.startswith("td3-") or reg.superseded_by(task_id) is not None:
            continue  # an older version cites what its newer one does
        loc = t.source.location
        cells = re.findall(r"Table ([12])(?: \([^)]*\))?, ([^:;)]*)", loc)
        assert cells, (task_id, loc)
        for table, cell in cells:
            layout = r"TD3 column, \w+ row" if table == "1" else r"TD3 row, \w+ column"
            assert re.match(layout, cell), (task_id, loc)
            if table == "1":
                seen_table_1.add(reg.entry(task_id).spec.env.gym_id)
    assert len(seen_table_1) == 3  # the Table 1 peaks are cited, as what the target is not


# -- the derived values against the shipped data ---------------------------------------------------


def test_shipped_curves_reproduce_table_2_and_table_1() -> None:
    data = _data()
    assert data["source"]["commit"] == TD3_REPO_COMMIT
    for env, value in TABLE_2.items():
        assert round(_final_mean(data["envs"][env]), 2) == value, env
    for env, (_, peak, std) in TABLE_1.items():
        e = data["envs"][env]
        at_peak = e["at_peak"]
        mean = sum(at_peak) / len(at_peak)
        pop_std = math.sqrt(sum((x - mean) ** 2 for x in at_peak) / len(at_peak))
        assert (round(mean, 2), round(pop_std, 2)) == (peak, std), env
        assert round(e["peak_of_mean_curve"], 2) == peak


def test_curve_derived_targets_match_the_shipped_data() -> None:
    data = _data()
    targets = _targets()
    derived = {
        "td3-inverted-pendulum-v1": ("InvertedPendulum-v1", 1.0),
        "td3-inverted-double-pendulum-v1": ("InvertedDoublePendulum-v1", 1.0),
        "td3-reacher-v1": ("Reacher-v1", -1.0),  # a cost: minus the return
    }
    for task_id, (env, sign) in derived.items():
        t = targets[task_id]
        final = _final_mean(data["envs"][env])
        assert t.value == round(sign * final, 2), task_id
        assert t.statistic is Statistic.FINAL_LAST_10_EVALUATIONS
        assert t.confidence == "approximate"
        assert t.source.data_commit == data["source"]["commit"]
        assert f"{final:.4f}" in t.source.location and f"{final:.4f}" in t.derivation
    # the changed targets, against the Table 1 peaks they replace
    assert targets["td3-inverted-double-pendulum-v1"].value == 8745.44 < 9337.47
    assert targets["td3-inverted-pendulum-v1"].value == 982.02 < 1000.0
    assert targets["td3-reacher-v1"].value == 4.10 > 3.60


def test_table_2_targets_are_confirmed_table_cells() -> None:
    targets = _targets()
    for task_id, env in (
        ("td3-halfcheetah-vec-v1", "HalfCheetah-v1"),
        ("td3-hopper-v1", "Hopper-v1"),
        ("td3-walker2d-repro-v1", "Walker2d-v1"),
    ):
        t = targets[task_id]
        assert t.value == TABLE_2[env] and t.confidence == "confirmed", task_id
        assert t.source.location.startswith("Table 2"), task_id
        assert t.statistic is Statistic.FINAL_LAST_10_EVALUATIONS


def test_tdmpc2_targets_are_the_seed_mean_at_the_budget_step() -> None:
    for task_id, t in _targets().items():
        if not task_id.startswith("tdmpc2-"):
            continue
        seeds = [float(x) for x in re.findall(r"seed \d ([0-9.]+)", t.source.location)]
        assert len(seeds) == 3, task_id
        assert round(sum(seeds) / 3, 2) == pytest.approx(t.value, abs=0.05), task_id
        assert t.source.data_commit is not None and t.source.data_commit in t.source.page


# -- the commands ----------------------------------------------------------------------------------


def _cli(tmp: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), "COLUMNS": str(columns)}
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_tasks_list_shows_statistic_and_fits_80_columns(tmp_path: Path) -> None:
    r = _cli(tmp_path, "tasks", "list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    # one table row per task, unwrapped
    for task_id in default_registry().ids():
        assert sum(1 for line in lines if task_id in line) >= 1
    assert "8745.44" in r.stdout
    # the statistic behind each target: in the --json document (the table keeps to 80 columns)
    j = _cli(tmp_path, "tasks", "list", "--json")
    assert j.returncode == 0, j.stderr
    labels = {
        (t["target"]["statistic_label"], t["target"]["confidence"])
        for t in json.loads(j.stdout)["tasks"]
        if t["target"] is not None
    }
    assert ("final, last 10 evals", "approximate") in labels
    assert any(label == "final, at budget" for label, _ in labels)


def test_tasks_show_prints_statistic_and_comparability(tmp_path: Path) -> None:
    r = _cli(tmp_path, "tasks", "show", "td3-walker2d-repro-v1", "--json", columns=200)
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    target = shown["manifest"]["target"]
    assert target["statistic"] == "final_last_10_evaluations"
    assert shown["target_statistic"]["description"].startswith("final performance")
    assert any("friction" in n for n in target["comparability"]["notes"])
    assert target["comparability"]["ours"]["env"].startswith("Walker2d-v5")
