"""The local executor's workers end without tearing their interpreter down.

A worker's interpreter finalization (freeing the simulator, numpy, the task model
and every cached env one by one) took about a tenth of a second per worker, which
``LocalExecutor.shutdown``, the evaluator's stop and so every ``ale-robotics run``
waited for. A worker now runs its ``atexit`` handlers, flushes its streams and
leaves with ``os._exit`` (``_PinnedSpawnProcess._bootstrap``). What these tests pin:
the exit is still clean (status 0, ``atexit`` handlers run, what it printed is
flushed) and the teardown is skipped (an object's ``__del__`` that finalization
would run is not run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ale_robotics.evaluator.execution import LocalExecutor, WorkerLimits

_NO_LIMITS = WorkerLimits(None, None, None, None, False)


def _probe(atexit_file: Path, del_file: Path) -> str:
    """An expression for ``eval`` in a worker: registers an ``atexit`` handler that
    writes ``atexit_file`` and keeps (in ``builtins``, alive to the end) an object whose
    ``__del__`` writes ``del_file`` (with ``open`` bound early: finalization may have
    cleared the module globals it would look it up in); evaluates to the worker's pid."""
    return (
        f"(__import__('atexit').register(lambda: open({str(atexit_file)!r}, 'w').close()), "
        "setattr(__import__('builtins'), '_ale_exit_probe', "
        "type('Probe', (), {'__del__': lambda self, _open=open: "
        f"_open({str(del_file)!r}, 'w').close()}})()), "
        "__import__('os').getpid())[-1]"
    )


def test_a_worker_runs_its_atexit_handlers_and_skips_the_teardown(tmp_path: Path) -> None:
    atexit_file, del_file = tmp_path / "atexit-ran", tmp_path / "del-ran"
    ex = LocalExecutor(1, _NO_LIMITS)
    try:
        pid = ex.run_in_worker(eval, _probe(atexit_file, del_file))
        procs = [p for pool, _ in ex._pools.values() for p in pool._processes.values()]
        assert [p.pid for p in procs] == [pid]
    finally:
        ex.shutdown()
    assert [p.exitcode for p in procs] == [0]
    assert atexit_file.exists(), "the worker's atexit handlers did not run"
    assert not del_file.exists(), "the worker tore its interpreter down (slow exit is back)"


def test_what_a_worker_prints_before_it_exits_is_not_lost(tmp_path: Path) -> None:
    """Python's and the C library's buffered output both reach a pipe (os._exit flushes
    neither by itself)."""
    script = tmp_path / "printing_worker.py"
    script.write_text(
        "import ctypes\n"
        "from ale_robotics.evaluator.execution import LocalExecutor, WorkerLimits\n"
        "def say() -> int:\n"
        "    print('from python', end='')\n"
        "    ctypes.CDLL(None).printf(b' and from C')\n"
        "    return 0\n"
        "if __name__ == '__main__':\n"
        "    ex = LocalExecutor(1, WorkerLimits(None, None, None, None, False))\n"
        "    try:\n"
        "        ex.run_in_worker(say)\n"
        "    finally:\n"
        "        ex.shutdown()\n"
    )
    # Buffered: PYTHONUNBUFFERED would make the C library's stdout unbuffered too.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "from python" in out.stdout
    assert "and from C" in out.stdout
