"""The one interface of an engine environment: :class:`Engine`.

An *engine* is a Python environment of its own in which a rollout kind's shards run,
for simulators that pin what the evaluator's environment cannot hold (MuJoCo Warp needs
mujoco >= 3.13 where the project pins 3.3; Isaac Lab 3 needs Python 3.12 and its own
torch). A kind names its engine (:attr:`ale_robotics.model.rollout_kind.RolloutKind.engine`);
the engine says which interpreter and which pinned packages make the environment, what to
import to check it, and what its workers need in their environment. Building it
(:mod:`.build`), finding it again (:mod:`.home`) and starting workers from it
(:mod:`.launch`) are the same for every engine, so an engine is a small declaration.

This module imports nothing of ours: an engine's class lives with the kind that uses it
(registered by an entry point, :mod:`.registry`) and must stay cheap to import.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import ClassVar

__all__ = ["Engine"]


class Engine(abc.ABC):
    """An environment of its own for a rollout kind's workers: interpreter, pins, checks.

    Subclasses set the class attributes; the methods have defaults that most engines
    keep. Instances are stateless (the registry keeps one per name and process).
    """

    name: ClassVar[str]
    """The engine's name: its entry point in ``ale_robotics.engines`` and what a kind's
    ``engine`` says (``ale-robotics engines install NAME``)."""

    python: ClassVar[str]
    """The interpreter's ``MAJOR.MINOR`` (``"3.11"``), found by :mod:`.pythons`."""

    constraints: ClassVar[str]
    """The file of ``constraints/`` that pins every distribution of the environment
    (``name==version`` lines): installed exactly, and nothing else (:mod:`.build`). An
    absolute path names a file elsewhere (an engine of another distribution)."""

    modules: ClassVar[tuple[str, ...]]
    """Modules an install must import (checked once it is built)."""

    reported: ClassVar[tuple[str, ...]]
    """Distributions whose versions name the engine in a result (the simulator's stack)."""

    summary: ClassVar[str] = ""
    """One line for ``ale-robotics engines list``: what the engine runs."""

    warm_up: ClassVar[str | None] = None
    """Python source run once in the environment after it is built, with
    :meth:`worker_env` (compile and cache what every worker would otherwise compile
    first: Warp's kernels); None: nothing to warm up."""

    device_probe: ClassVar[str | None] = None
    """Python source run in the environment that prints the device its workers will use
    (``cpu``, ``cuda:0``), on the first use per evaluator process; the workers get it as
    ``ALE_ENGINE_DEVICE`` and results name it. None: the engine has no device choice."""

    system_packages: ClassVar[tuple[str, ...]] = ()
    """Debian packages the engine needs from the host (``apt-get install
    --no-install-recommends``, as root), installed before its venv is made
    (:mod:`.system`); none by default."""

    interpreter: ClassVar[str | None] = None
    """The interpreter the venv is made from, by path, instead of one found by ``python``:
    a system's own (Debian's ``/usr/bin/python3``, for which its packages are built);
    None: found by version (:mod:`.pythons`)."""

    omitted_requirements: ClassVar[frozenset[str]] = frozenset()
    """Distributions that the pinned ones declare as requirements but the engine leaves out
    on purpose (normalized names): what the kind's code path never imports, measured, so
    that a lean engine need not install a framework's every extra (Isaac Lab declares open3d,
    transformers, Isaac Sim's client...). The build's ``pip check`` allows exactly these to
    be missing; any other complaint still fails it. Empty by default: every requirement
    pinned."""

    agent_trains_with: ClassVar[bool] = False
    """Whether an agent of the kind's tasks trains with the engine's packages (Isaac Lab's
    env, RSL-RL): the run's sandbox then shows the built engine read-only and names its
    Python in ``ALE_ENGINE_PYTHON`` (:func:`.usage.agent_engine`). Never for a task whose
    simulator runs only in the evaluator."""

    system_site_packages: ClassVar[bool] = False
    """Open the venv to the interpreter's system site-packages once its pins are installed
    and checked (what apt installed imports behind the pins, :mod:`.system`)."""

    def worker_env(self, home: Path) -> dict[str, str]:
        """Environment variables of the engine's workers (and of its warm-up), given the
        directory of its install (``home``): caches that belong with the install. By
        default none."""
        return {}

    def __repr__(self) -> str:
        return f"<engine {self.name!r} (Python {self.python}, constraints/{self.constraints})>"
