"""A task whose engine is not built here is refused before its run, naming the install.

Three doors, one message: ``ale-robotics run`` refuses before it makes anything (exit 2,
one line), an evaluator refuses the submission (FAILED_PRECONDITION, no job), and the
executor fails a job as the infrastructure's, never the submission's (tests/engines/
test_workers.py). The engines home is an empty directory, so nothing is built.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ale_robotics.engines.errors import EngineNotInstalled
from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.harness.options import RunOptions
from ale_robotics.harness.preflight import check_options
from ale_robotics.tasks import default_registry

TASK = "td3-inverted-pendulum-warp-v1"
INSTALL = "ale-robotics engines install mujoco-warp"
CLI = [sys.executable, "-m", "ale_robotics"]


@pytest.fixture
def nothing_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "engines"
    monkeypatch.setenv("ALE_ENGINES_DIR", str(home))
    return home


def test_run_refuses_before_making_anything(nothing_built: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [*CLI, "run", TASK, "--agent", "true", "--sandbox", "none", "--run-dir", str(run_dir)],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert INSTALL in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not run_dir.exists()


def test_preflight_refuses_only_for_an_embedded_evaluator(nothing_built: Path) -> None:
    task = default_registry().get(TASK)
    with pytest.raises(EngineNotInstalled, match=INSTALL):
        check_options(RunOptions(task_id=TASK, agent_cmd="true"), task)
    # the evaluator's own kinds need nothing built
    plain = default_registry().get("td3-inverted-pendulum-v2")
    check_options(RunOptions(task_id=plain.id, agent_cmd="true"), plain)


def test_an_evaluator_refuses_the_submission(nothing_built: Path, tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    volume.mkdir()
    ev = Evaluator(
        EvaluatorConfig(tmp_path / "state", volume, task_id=TASK, run_id="run-1", workers=1),
        default_registry(),
    )
    ev.start()
    try:
        with pytest.raises(FailedPreconditionError, match=INSTALL):
            ev.submit(TASK, "run-1", "", "token-1")
        assert ev.store.latest_for_run("run-1") is None  # no job, nothing counted
    finally:
        ev.stop()


def test_only_the_local_executor_runs_an_engines_workers() -> None:
    """Ray's workers are the evaluator's interpreter: a run asking for them is refused
    before it starts, and the Ray executor refuses the job (never a score of anything)."""
    from engine_support import need_engine

    from ale_robotics.evaluator.execution import WorkerCrashed
    from ale_robotics.evaluator.execution.ray import RayExecutor

    task = default_registry().get(TASK)
    ray = RayExecutor.__new__(RayExecutor)  # no Ray started: the refusal comes first
    with pytest.raises(WorkerCrashed, match="--executor local"):
        ray.run(task, {}, [1])
    need_engine("mujoco-warp")
    with pytest.raises(InvalidArgumentError, match="the ray executor cannot start workers"):
        check_options(RunOptions(task_id=TASK, agent_cmd="true", executor="ray"), task)
