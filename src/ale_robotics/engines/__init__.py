"""Engine environments: Python environments of their own for rollout kinds whose simulators
cannot share the evaluator's (a seam like sandboxes and executors).

::

    base.Engine              the interface: interpreter, pins, checks, warm-up, device probe
    registry                 engines by name (entry points "ale_robotics.engines")
    home                     where builds live, the key that names one (pins -> key)
    pythons                  the interpreter of an engine's version
    build                    build once from the registries, check, record (engine.json)
    launch.WorkerLaunch      how a worker starts there (the ale_robotics overlay, env, device)
    usage                    require_engine (refuse a task before its run), engine_used

    errors: FailedPreconditionError
            ├── EngineNotInstalled   names 'ale-robotics engines install NAME'
            └── EngineUnavailable    cannot be built or used here, and why

A rollout kind names its engine (``RolloutKind.engine``); the local executor starts that
kind's workers with the engine's interpreter and talks to them over the same worker
protocol as to any other (``ale_robotics.evaluator.execution``). The names below load on
first use: the registry is what most callers need, and it imports no engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.engines.base import Engine
    from ale_robotics.engines.build import install, installed
    from ale_robotics.engines.errors import EngineNotInstalled, EngineUnavailable, install_command
    from ale_robotics.engines.home import build_dir, engine_key, engines_home
    from ale_robotics.engines.launch import WorkerLaunch, worker_launch
    from ale_robotics.engines.record import InstalledEngine
    from ale_robotics.engines.registry import engine_names, engine_of_kind, get_engine, kinds_of
    from ale_robotics.engines.usage import engine_used, require_engine

__all__ = [
    "Engine",
    "EngineNotInstalled",
    "EngineUnavailable",
    "InstalledEngine",
    "WorkerLaunch",
    "build_dir",
    "engine_key",
    "engine_names",
    "engine_of_kind",
    "engine_used",
    "engines_home",
    "get_engine",
    "install",
    "install_command",
    "installed",
    "kinds_of",
    "require_engine",
    "worker_launch",
]

_P = "ale_robotics.engines."
_WHERE = {
    "Engine": _P + "base",
    "EngineNotInstalled": _P + "errors",
    "EngineUnavailable": _P + "errors",
    "install_command": _P + "errors",
    "build_dir": _P + "home",
    "engine_key": _P + "home",
    "engines_home": _P + "home",
    "install": _P + "build",
    "installed": _P + "build",
    "WorkerLaunch": _P + "launch",
    "worker_launch": _P + "launch",
    "InstalledEngine": _P + "record",
    "engine_names": _P + "registry",
    "engine_of_kind": _P + "registry",
    "get_engine": _P + "registry",
    "kinds_of": _P + "registry",
    "engine_used": _P + "usage",
    "require_engine": _P + "usage",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
