"""Which client holds which session: WatchSessions streams, and clients gone without a word.

Split from :mod:`.manager` (its :class:`~.manager.SessionManager` is a
:class:`SessionWatches`): a session named on a watch whose stream ended, or whose
shared-memory data plane's socket closed without a goodbye, is an orphan, closed
``orphan_grace_s`` later by the manager's reaper unless a new watch names it or a call
uses it first.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ale_robotics.evaluator.runs.access import RunAccess
from ale_robotics.evaluator.runs.registry import TRUSTED, Scope

if TYPE_CHECKING:
    from ale_robotics.evaluator.sessions.vector import Session

__all__ = ["SessionWatches", "Watch"]

log = logging.getLogger(__name__)

_watch_ids = itertools.count(1)


@dataclass(eq=False)
class Watch:
    """One WatchSessions stream: the sessions its client named on it."""

    id: int = field(default_factory=lambda: next(_watch_ids))
    sessions: set[str] = field(default_factory=set)


class SessionWatches:
    """The watch and orphan bookkeeping of the session table (the manager's state)."""

    _lock: threading.Lock
    _sessions: dict[str, Session]
    _access: RunAccess
    _watcher: dict[str, int]  # session id -> the Watch.id that names it
    _orphans: dict[str, float]  # session id -> monotonic time it is closed at
    orphan_grace_s: float

    def attach(self, watch: Watch, session_ids: Iterable[str], scope: Scope = TRUSTED) -> list[str]:
        """Watch these sessions on ``watch`` (taking them from any other watch); returns the
        ids that name no open session visible to ``scope`` (those are not watched)."""
        missing: list[str] = []
        with self._lock:
            for sid in session_ids:
                session = self._sessions.get(sid)
                if session is None or not self._access.visible(scope, session.run_id):
                    missing.append(sid)
                    continue
                self._watcher[sid] = watch.id
                self._orphans.pop(sid, None)
                watch.sessions.add(sid)
        return missing

    def unwatch(self, watch: Watch) -> int:
        """The watch stream ended; returns how many sessions it leaves orphaned.

        Each session still watched by it is closed :attr:`orphan_grace_s` from now
        by :meth:`reap`, unless a new watch names it or a call uses it first. Every
        end counts: gRPC gives a server no reliable way to tell a client's
        half-close from its death, and a client never ends a watch while it holds
        sessions (it ends it after closing its last).
        """
        deadline = time.monotonic() + self.orphan_grace_s
        orphaned = 0
        with self._lock:
            for sid in watch.sessions:
                if self._watcher.get(sid) != watch.id:
                    continue  # closed since, or named by a newer watch
                del self._watcher[sid]
                if sid in self._sessions:
                    self._orphans[sid] = deadline
                    orphaned += 1
            watch.sessions.clear()
        if orphaned:
            log.info(
                "a watch stream ended: %d session(s) close in %gs", orphaned, self.orphan_grace_s
            )
        return orphaned

    def orphan(self, session_id: str) -> bool:
        """The session's client is gone (its data plane's socket closed without a goodbye):
        closed :attr:`orphan_grace_s` from now by :meth:`reap`, unless a call or a watch
        names it first, exactly as after a broken watch (:meth:`unwatch`). False when it is
        not open."""
        with self._lock:
            if session_id not in self._sessions:
                return False
            self._orphans[session_id] = time.monotonic() + self.orphan_grace_s
        log.info(
            "session %s: its data plane ended without a goodbye; closing it in %gs",
            session_id,
            self.orphan_grace_s,
        )
        return True
