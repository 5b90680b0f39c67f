"""Worker processes in an engine's environment: the spawn context of an engine's pool.

A rollout kind that runs in an engine environment (:mod:`ale_robotics.engines`) gets a
pool of its own in the local executor, whose processes start with that engine's
interpreter instead of the evaluator's, and whose ``sys.path`` is the engine's
(:class:`~ale_robotics.engines.launch.WorkerLaunch`: an overlay holding only
``ale_robotics``, then the engine's stdlib and site-packages). Everything else is the
ordinary worker: the pool pickles the same calls to it (:func:`.worker_process.init_worker`,
:func:`.worker_process.run_shard_in_worker`), it applies the same limits and reports progress
on the same queue. multiprocessing's pickles and its spawn handshake are the same across
the Python versions an engine may have (3.11 to 3.13: the evaluator on 3.11 drives an
Isaac Lab worker on 3.12).

Two things of a plain spawn are changed, in :meth:`_EnginePopen._launch`, a copy of
CPython's ``popen_spawn_posix.Popen._launch`` (3.11 to 3.13 alike) but for them:

* the interpreter is the engine's (``multiprocessing.set_executable`` would change it for
  every pool of the process), started isolated (``-I``: no ``PYTHON*`` variable, no user
  site, no current directory on the path);
* the preparation data sent to the child carries the engine's ``sys.path`` and no main
  module: the parent's ``sys.path`` (its own site-packages, with its own numpy and
  mujoco) and its main script (the command line, pytest) must not reach the engine.
"""

from __future__ import annotations

import functools
import io
import os
import signal
from multiprocessing import popen_spawn_posix, reduction, resource_tracker, spawn, util
from multiprocessing.context import SpawnContext, set_spawning_popen
from typing import Any

from ale_robotics.engines.launch import WorkerLaunch
from ale_robotics.evaluator.execution.worker_process import (
    STOP_SIGNALS,
    PinnedSpawnContext,
    pinned_env,
)

__all__ = ["EngineSpawnContext", "engine_command"]

_MAIN = (
    "import os; os.dup2(2, 1); "
    "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd={}, pipe_handle={})"
)


def engine_command(python: str, tracker_fd: int, pipe_handle: int) -> list[str]:
    """The command line of an engine worker: its interpreter, isolated, running
    multiprocessing's child side, its standard output sent to its standard error.

    An engine's libraries print to standard output (Isaac Lab: ``[INFO]: Parsing
    configuration ...`` for every env it makes), which the worker would share with the
    command that started the evaluator; that command's output must stay its own (``audit
    --json`` printed Isaac Lab's lines before its JSON). The worker talks to its pool over
    pipes of its own, never its standard output."""
    return [python, "-I", "-c", _MAIN.format(tracker_fd, pipe_handle), "--multiprocessing-fork"]


def _close_fds(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


class _EnginePopen(popen_spawn_posix.Popen):
    """A spawn with the engine's interpreter and path (see the module docstring)."""

    _fds: list[int]  # the parent's: file descriptors the child inherits

    def __init__(self, process_obj: Any, launch: WorkerLaunch) -> None:
        self._engine = launch
        super().__init__(process_obj)

    def _launch(self, process_obj: Any) -> None:
        launch = self._engine
        tracker_fd = resource_tracker.getfd()
        assert tracker_fd is not None  # getfd() starts the tracker when it is not running
        self._fds.append(tracker_fd)
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data["sys_path"] = list(launch.sys_path)
        prep_data.pop("init_main_from_path", None)
        prep_data.pop("init_main_from_name", None)
        fp = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, fp)
            reduction.dump(process_obj, fp)
        finally:
            set_spawning_popen(None)

        parent_r = child_w = child_r = parent_w = None
        try:
            parent_r, child_w = os.pipe()
            child_r, parent_w = os.pipe()
            cmd = engine_command(launch.python, tracker_fd, child_r)
            self._fds.extend([child_r, child_w])
            self.pid = util.spawnv_passfds(os.fsencode(launch.python), cmd, self._fds)
            self.sentinel = parent_r
            with open(parent_w, "wb", closefd=False) as f:
                f.write(fp.getbuffer())
        finally:
            fds_to_close = [fd for fd in (parent_r, parent_w) if fd is not None]
            self.finalizer = util.Finalize(self, _close_fds, fds_to_close)
            for fd in (child_r, child_w):
                if fd is not None:
                    os.close(fd)


class _EngineProcess(PinnedSpawnContext.Process):  # type: ignore[misc,valid-type]
    """A pinned worker process (one BLAS thread, stop signals blocked while it starts)
    started in an engine's environment, with the engine's variables."""

    def __init__(self, *args: Any, launch: WorkerLaunch, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ale_launch = launch

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        launch: WorkerLaunch = process_obj._ale_launch
        with pinned_env(dict(launch.env)):
            old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            try:
                return _EnginePopen(process_obj, launch)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)


class EngineSpawnContext(SpawnContext):
    """The spawn context of one engine's pool: its ``Process`` starts engine workers."""

    def __init__(self, launch: WorkerLaunch) -> None:
        super().__init__()
        self.launch = launch
        self.Process = functools.partial(_EngineProcess, launch=launch)  # type: ignore[misc,assignment]
