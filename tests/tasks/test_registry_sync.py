"""`ale-robotics registry sync` accepts only manifests made for the installed configs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ale_robotics.tasks import load_manifest

CLI = [sys.executable, "-m", "ale_robotics"]


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}


def _write(tmp: Path, mutate=None) -> Path:
    data = json.loads(load_manifest().model_dump_json())
    if mutate is not None:
        mutate(data)
    path = tmp / "manifest.json"
    path.write_text(json.dumps(data))
    return path


def test_sync_then_list_uses_it(tmp_path: Path) -> None:
    def retarget(d: dict) -> None:
        d["release"] = "v0.5-op"
        d["tasks"]["td3-inverted-pendulum-v1"]["target"]["value"] = 900.0

    path = _write(tmp_path, retarget)
    r = subprocess.run(
        [*CLI, "registry", "sync", str(path)],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "state" / "ale-robotics" / "manifest.json").exists()
    shown = subprocess.run(
        [*CLI, "tasks", "show", "td3-inverted-pendulum-v1", "--json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(shown.stdout)["manifest"]["target"]["value"] == 900.0


def test_wrong_hash_is_refused(tmp_path: Path) -> None:
    def corrupt(d: dict) -> None:
        d["tasks"]["td3-inverted-pendulum-v1"]["config_sha256"] = "ab" * 32

    r = subprocess.run(
        [*CLI, "registry", "sync", str(_write(tmp_path, corrupt))],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "was made for config sha256 abababababab" in r.stderr
    assert not (tmp_path / "state" / "ale-robotics" / "manifest.json").exists()


def test_unsourced_value_is_refused(tmp_path: Path) -> None:
    def unsourced(d: dict) -> None:
        d["tasks"]["td3-inverted-pendulum-v1"]["target"]["source"]["paper"] = ""

    r = subprocess.run(
        [*CLI, "registry", "sync", str(_write(tmp_path, unsourced))],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "needs a source" in r.stderr


def test_unknown_task_is_refused(tmp_path: Path) -> None:
    def extra(d: dict) -> None:
        d["tasks"]["made-up-v1"] = d["tasks"]["td3-inverted-pendulum-v1"]

    r = subprocess.run(
        [*CLI, "registry", "sync", str(_write(tmp_path, extra))],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "made-up-v1" in r.stderr


def test_tasks_list_shows_every_task_with_its_target_and_full_source(tmp_path: Path) -> None:
    from ale_robotics.tasks import default_registry

    r = subprocess.run(
        [*CLI, "tasks", "list", "--json"],
        env={**_env(tmp_path), "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    rows = {t["id"]: t for t in json.loads(r.stdout)["tasks"]}
    reg = default_registry()
    for entry in reg:
        row = rows[entry.spec.id]
        target = reg.target(entry.spec.id)
        if target is None:
            assert row["target"] is None
            continue
        assert row["target"]["value"] == target.value
        assert row["target"]["location"] == target.source.location  # whole, never cut


def _sync(tmp: Path, mutate) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "registry", "sync", str(_write(tmp, mutate))],
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_bundled_manifest_supersedes_the_old_layouts_by_their_v2() -> None:
    from ale_robotics.tasks import Registry, default_registry

    manifest = load_manifest()
    Registry.bundled(manifest).check_manifest(manifest)  # what `registry sync` checks
    reg = default_registry()
    old = {i: reg.superseded_by(i) for i in reg.ids() if reg.superseded_by(i)}
    assert old == {
        "td3-inverted-pendulum-v1": "td3-inverted-pendulum-v2",
        "td3-walker2d-repro-v1": "td3-walker2d-repro-v2",
        # the same measurement, a gate that wants evidence of training (issue 26)
        "td3-walker2d-repro-v2": "td3-walker2d-repro-v3",
        # the training budget in the paper's unit, environment steps (issue 27)
        "tdmpc2-cheetah-run-v1": "tdmpc2-cheetah-run-v2",
        "tdmpc2-walker-run-v1": "tdmpc2-walker-run-v2",
        "tdmpc2-mw-push-v1": "tdmpc2-mw-push-v2",
        # planning timed in CPU seconds, not wall-clock seconds (issue 27)
        "panda-planner-config-v1": "panda-planner-config-v2",
        "edmp-v1": "edmp-v2",
    }
    assert manifest.tasks["td3-walker2d-repro-v2"].target == (
        manifest.tasks["td3-walker2d-repro-v3"].target
    )
    layouts = {v1: v2 for v1, v2 in old.items() if v1.startswith("td3-") and v1.endswith("-v1")}
    for v1, v2 in layouts.items():  # the same task but for how the evaluator steps it
        a, b = reg.get(v1), reg.get(v2)
        assert (a.env, a.contract, a.metrics, a.eval.base_seeds) == (
            b.env,
            b.contract,
            b.metrics,
            b.eval.base_seeds,
        )
        assert a.eval.rollout == "gymnasium" and b.eval.rollout == "mujoco_rollout"
        t1, t2 = manifest.tasks[v1].target, manifest.tasks[v2].target
        assert t1 is not None and t2 is not None
        # the same target; v2's comparability says what its engine changes: the cold solver
        *same, engine = t2.comparability.notes
        assert "constraint solver cold" in engine and "mujoco_rollout" in engine
        assert t1 == t2.model_copy(
            update={"comparability": t2.comparability.model_copy(update={"notes": same})}
        )
    for task_id in ("td3-halfcheetah-vec-v1", "td3-walker2d-repro-v3"):  # every rollout-engine task
        target = manifest.tasks[task_id].target
        assert target is not None and "constraint solver cold" in target.comparability.notes[-1]
    for v1, v2 in old.items():  # TD-MPC2: the same task and target row, the budget's unit
        if not v1.startswith("tdmpc2-"):
            continue
        a, b = reg.get(v1), reg.get(v2)
        assert a.model_copy(update={"id": v2, "description": "", "session": None}) == (
            b.model_copy(update={"description": "", "session": None})
        )
        assert a.session is not None and b.session is not None
        assert (a.session.training_step_unit, b.session.training_step_unit) == (
            "agent_step",
            "simulator_step",
        )
        steps = manifest.tasks[v1].compute_budget.training_steps
        assert steps == manifest.tasks[v2].compute_budget.training_steps
        budget_v1, budget_v2 = reg.training_budget(v1), reg.training_budget(v2)
        assert budget_v1 is not None and budget_v2 is not None
        assert budget_v1.agent_steps == 2 * budget_v2.agent_steps == steps
        assert manifest.tasks[v1].target.value == manifest.tasks[v2].target.value  # type: ignore[union-attr]
    for v1 in ("panda-planner-config-v1", "edmp-v1"):  # the same problems, another clock
        a, b = reg.get(v1), reg.get(old[v1])
        assert a.planning is not None and b.planning is not None
        assert (a.planning.clock, b.planning.clock) == ("wall", "cpu")
        assert a.planning.model_copy(update={"clock": "cpu"}) == b.planning
        assert (a.eval, a.scoring, a.mode, a.env) == (b.eval, b.scoring, b.mode, b.env)
        assert {m.name for m in b.metrics} == {m.name for m in a.metrics} | {"planning_wall_time"}
        assert manifest.tasks[v1].target is None and manifest.tasks[old[v1]].target is None


def test_superseded_by_must_name_a_newer_version_of_the_task(tmp_path: Path) -> None:
    def other_task(d: dict) -> None:
        d["tasks"]["td3-inverted-pendulum-v1"]["superseded_by"] = "td3-hopper-v1"

    r = _sync(tmp_path, other_task)
    assert r.returncode == 2
    assert "can only be superseded by a newer version of itself" in r.stderr

    def older(d: dict) -> None:
        d["tasks"]["td3-inverted-pendulum-v2"]["superseded_by"] = "td3-inverted-pendulum-v1"

    r = _sync(tmp_path, older)
    assert r.returncode == 2
    assert "td3-inverted-pendulum-vN with N > 2" in r.stderr

    def unlisted(d: dict) -> None:
        del d["tasks"]["td3-inverted-pendulum-v2"]

    r = _sync(tmp_path, unlisted)
    assert r.returncode == 2
    assert "which the manifest does not list" in r.stderr
    assert not (tmp_path / "state" / "ale-robotics" / "manifest.json").exists()
