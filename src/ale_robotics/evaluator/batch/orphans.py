"""Which expired jobs no evaluator can take over: their run's evaluator is dead for sure.

After ``kill -9`` of a harness, its embedded evaluator dies with it, and its job stays
RUNNING: the lease reaper of another evaluator requeues only what it may run (an
embedded one only its own run's), and nobody will ever serve that run again. Every
evaluator's lease reaper (on start, then every third of a lease) therefore ends such a
job FAILED (infrastructure) with the reason :func:`orphan_reason` gives, and leaves every
other expired job to the lease model (:mod:`ale_robotics.evaluator.store.ports`):

* a run open in the store (OpenRun) is served by every shared evaluator: requeued;
* a run of ``evaluator serve --run-id`` (its token file is in the shared state dir,
  :meth:`.state.directory.StateDir.has_run_token`) is taken over by that command
  restarted: left to it;
* this evaluator's own run: requeued by it;
* otherwise (an embedded run) only when its owner's process is certainly gone: the owner
  id names this host and a pid with no live process. An owner on another host, or a pid
  that is alive (perhaps reused), is not touched: "a live process's jobs are never
  touched" wins over recovering a row.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from ale_robotics.evaluator.store import ExpiredJob

__all__ = ["OrphanPolicy", "owner_process", "process_gone"]


def owner_process(owner: str) -> tuple[str, int] | None:
    """``(host, pid)`` of an owner id (``host:pid:random``); None for another form."""
    host, _, rest = owner.partition(":")
    pid = rest.split(":", 1)[0]
    return (host, int(pid)) if host and pid.isdigit() else None


def process_gone(pid: int) -> bool:
    """Whether no live process has ``pid`` on this host (a zombie counts as gone)."""
    if sys.platform.startswith("linux"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        except OSError:  # unreadable: it exists
            return False
        return stat.rsplit(")", 1)[-1].split()[:1] in (["Z"], ["X"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class OrphanPolicy:
    """The reason to fail an expired job no evaluator can take over, or None (the module
    docstring has the rules); what :meth:`.store.JobQueue.fail_orphaned` asks per job."""

    def __init__(
        self,
        *,
        bound_run: str | None,
        resumable: Callable[[str], bool],
        host: str | None = None,
    ) -> None:
        self._bound_run = bound_run
        self._resumable = resumable
        self._host = host or socket.gethostname()

    def __call__(self, job: ExpiredJob) -> str | None:
        if job.run_open or job.run_id == self._bound_run or self._resumable(job.run_id):
            return None
        who = owner_process(job.owner)
        if who is None or who[0] != self._host or not process_gone(who[1]):
            return None
        return (
            f"its evaluator died (process {who[1]} on host {who[0]}) and no evaluator can "
            "take the run over"
        )
