"""Workers in an engine's environment: the local executor runs a kind's shards there.

The tiny plug-in's kind names the tiny engine; the executor starts its workers with the
engine's interpreter, and they answer over the usual worker protocol: shards, progress,
limits. What they see proves where they run: the engine's site-packages and pins, the
kinds of the evaluator's own ``ale_robotics`` (through the overlay), the engine's variables
and device, and no module of the evaluator's environment (no MuJoCo).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_tiny import copy_plugin, task_of_kind
from helpers import random_weights

from ale_robotics.engines import build_dir, get_engine, install, require_engine
from ale_robotics.engines.errors import EngineNotInstalled
from ale_robotics.engines.record import InstalledEngine
from ale_robotics.evaluator.execution import LocalExecutor, WorkerCrashed
from ale_robotics.model.kind_registry import kind_names


def _site_packages(record: InstalledEngine) -> Path:
    return next(Path(p) for p in record.sys_path if p.endswith("site-packages"))


@pytest.fixture(scope="module")
def built(tiny: Path) -> InstalledEngine:
    record = install(get_engine("tiny"))
    copy_plugin(tiny, _site_packages(record))  # the kind, found by its entry point there too
    return record


@pytest.fixture
def executor(built: InstalledEngine) -> Iterator[LocalExecutor]:
    pool = LocalExecutor(workers=1)
    try:
        yield pool
    finally:
        pool.shutdown()


def test_a_kinds_shards_run_in_its_engines_workers(
    built: InstalledEngine, executor: LocalExecutor
) -> None:
    task = task_of_kind("tiny_kind")
    seeds = [1009, 20011, 300007, 4000037, 50000017]
    done: list[int] = []
    outcomes = executor.run(task, random_weights(task), seeds, on_progress=done.append)
    assert [o.ret for o in outcomes] == [float(s % 997) for s in seeds]
    # the kind reports the worker's Python minor version as each episode's length
    assert {o.length for o in outcomes} == {int(built.python_version.split(".")[1])}
    assert done and done[-1] == len(seeds)


def test_engine_workers_see_the_engine_not_the_evaluators_environment(
    built: InstalledEngine, executor: LocalExecutor
) -> None:
    task = task_of_kind("tiny_kind")

    def ask(fn: object, *args: object) -> object:
        return executor.run_in_worker(fn, *args, task=task)  # type: ignore[arg-type]

    assert Path(str(ask(sysconfig.get_path, "purelib"))) == _site_packages(built)
    assert ask(importlib.metadata.version, "numpy") == built.versions["numpy"]
    with pytest.raises(ModuleNotFoundError, match="mujoco"):
        ask(importlib.import_module, "mujoco")  # the evaluator's env holds it; the engine not
    kinds = ask(kind_names)
    assert isinstance(kinds, list) and {"tiny_kind", "mujoco_warp", "gymnasium"} <= set(kinds)
    assert ask(os.getenv, "TINY_HOME") == str(build_dir(get_engine("tiny")))
    assert ask(os.getenv, "ALE_ENGINE") == "tiny"
    assert ask(os.getenv, "ALE_ENGINE_DEVICE") == "tiny-device"  # the probe's answer
    assert ask(os.getppid) == os.getpid()
    # the default pool's workers are still the evaluator's own
    assert executor.run_in_worker(sysconfig.get_path, "purelib") == sysconfig.get_path("purelib")


def test_a_task_whose_engine_is_not_built_is_refused_naming_the_install(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALE_ENGINES_DIR", str(tmp_path / "empty"))
    task = task_of_kind("tiny_kind")
    with pytest.raises(EngineNotInstalled, match="ale-robotics engines install tiny"):
        require_engine(task)
    pool = LocalExecutor(workers=1)
    try:
        assert pool.prestart(task) == 0  # nothing to start; the job says why
        with pytest.raises(WorkerCrashed, match="ale-robotics engines install tiny"):
            pool.run(task, random_weights(task), [1, 2])
        assert pool.worker_pids() == []
    finally:
        pool.shutdown()


@pytest.mark.slow
def test_a_worker_on_another_python_speaks_the_same_protocol(tiny: Path) -> None:
    """The evaluator's Python drives a Python 3.12 worker (Isaac Lab's version): the spawn
    handshake, the pool's pickles, progress and the results all cross versions."""
    record = install(get_engine("tiny312"))
    copy_plugin(tiny, _site_packages(record))
    assert record.python_version.startswith("3.12.")
    task = task_of_kind("tiny312_kind")
    pool = LocalExecutor(workers=2)
    try:
        done: list[int] = []
        seeds = list(range(1000, 1040, 3))
        outcomes = pool.run(task, random_weights(task), seeds, on_progress=done.append)
        assert [o.ret for o in outcomes] == [float(s % 997) for s in seeds]
        assert {o.length for o in outcomes} == {12}
        assert done[-1] == len(seeds)
    finally:
        pool.shutdown()
