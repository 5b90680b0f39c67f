"""How a worker process starts in an engine's environment: :class:`WorkerLaunch`.

The worker runs the engine's interpreter with ``sys.path`` set to

1. an *overlay* directory holding only ``ale_robotics`` (a symlink to the package this
   process runs, source tree or site-packages alike) and a copy of its distribution
   metadata (``METADATA``, ``entry_points.txt``: the rollout kinds and engines are found
   by entry points there too), then
2. the engine interpreter's own ``sys.path`` (its stdlib and its venv's site-packages),
   as recorded when the engine was built.

So the kind's code is the very module set the evaluator runs, and every other import
(numpy, pydantic, the simulator) comes from the engine's pins: nothing of the
evaluator's environment is on the path, and the evaluator's environment holds nothing of
the engine's. The executor uses this to spawn the worker
(:mod:`ale_robotics.evaluator.execution.worker_process`), which then speaks the same
worker protocol as any other: the same initializer, limits, shards and progress.

The device the workers use (``cpu``, ``cuda:0``) is decided here, once per process, by
the engine's probe run in its environment, and handed to them as ``ALE_ENGINE_DEVICE``,
so that the evaluator can name it in the result (:func:`engine_used`).
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass, field

from ale_robotics.engines.base import Engine
from ale_robotics.engines.build import installed
from ale_robotics.engines.errors import EngineNotInstalled, EngineUnavailable
from ale_robotics.engines.home import build_dir
from ale_robotics.engines.overlay import overlay, with_overlay
from ale_robotics.engines.record import InstalledEngine

__all__ = ["DEVICE_VAR", "ENGINE_VAR", "WorkerLaunch", "engine_device", "worker_launch"]

ENGINE_VAR = "ALE_ENGINE"
"""Set in an engine worker's environment: the engine's name."""
DEVICE_VAR = "ALE_ENGINE_DEVICE"
"""Set in an engine worker's environment: the device the probe chose."""


@dataclass(frozen=True)
class WorkerLaunch:
    """What starts a worker in an engine's environment (hashable: a pool's profile)."""

    engine: str
    key: str
    python: str
    sys_path: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = field(default=())
    """Variables set in the worker's environment (sorted pairs)."""
    device: str = ""


@functools.cache
def engine_device(engine: Engine, python: str, key: str) -> str:
    """The device the engine's workers use here (its probe's answer), once per process;
    ``""`` for an engine without a device choice."""
    if engine.device_probe is None:
        return ""
    env = {**os.environ, **engine.worker_env(build_dir(engine))}
    done = subprocess.run(
        [python, "-I", "-c", with_overlay(engine.device_probe)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    answer = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    if not answer:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise EngineUnavailable(
            f"the device probe of the engine {engine.name!r} failed (exit {done.returncode}): "
            + " / ".join(tail)
            + f"; reinstall it (ale-robotics engines install --force {engine.name})"
        )
    return answer[0].strip()


def worker_launch(engine: Engine, task_id: str | None = None) -> WorkerLaunch:
    """How to start a worker of ``engine``; :class:`EngineNotInstalled` (naming the
    command that builds it) when it is not built here."""
    record: InstalledEngine | None = installed(engine)
    if record is None:
        raise EngineNotInstalled(engine.name, task_id)
    device = engine_device(engine, record.python, record.key)
    env = dict(engine.worker_env(build_dir(engine)))
    env[ENGINE_VAR] = engine.name
    if device:
        env[DEVICE_VAR] = device
    return WorkerLaunch(
        engine=engine.name,
        key=record.key,
        python=record.python,
        sys_path=(str(overlay()), *record.sys_path),
        env=tuple(sorted(env.items())),
        device=device,
    )
