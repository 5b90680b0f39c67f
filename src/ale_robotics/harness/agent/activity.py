"""Is the agent still doing anything? What the console shows of it, and the idle report.

A stuck agent looks like a busy one from outside: Codex retrying "waiting for network" for
hours, an SDK loop waiting on a dead tool, a script sleeping. Two things make it visible:

* the console shows, beside the budget, the agent's last line of output, or the model
  gateway's last refusal when that came later (what an operator would grep ``agent.log``
  for);
* the agent's calls are timed: its model calls (the gateway) and its calls to the
  evaluator (``GetRunActivity`` on the harness channel: every agent RPC and every Step or
  Reset, whatever the transport). Past ``--agent-idle-s`` without either, the run records
  an ``agent_idle`` event and the console says so, once per idle stretch; ``result.json``
  keeps the longest stretch and whether one was reported. An agent training offline for
  long is idle in this sense too: it is reported, never stopped.

Frozen time (the agent stopped while a job with host-timed metrics runs) counts as
activity: a frozen agent cannot call anything.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ale_robotics.errors import AleError, UnimplementedError
from ale_robotics.v1 import ale_env_pb2 as pb

if TYPE_CHECKING:
    from ale_robotics.client.sdk import AleClient
    from ale_robotics.harness.agent.access import AgentAccess
    from ale_robotics.trajectory import TrajectoryWriter

__all__ = ["DEFAULT_IDLE_S", "ActivityWatch", "AgentActivity", "LastLine"]

DEFAULT_IDLE_S: Final = 600.0
"""``--agent-idle-s``' default: ten minutes without a model or evaluator call."""
POLL_S: Final = 5.0
"""How often the evaluator is asked when the agent last called it."""
_LINE_MAX: Final = 160
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]|\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class AgentActivity:
    """What the console shows of a running agent beside its budget."""

    last_line: str | None
    """Its last line of output, or the model gateway's last refusal if that came later."""
    idle_s: float
    """Seconds since its last model or evaluator call (or its start)."""
    idle: bool
    """Past the run's ``--agent-idle-s``."""


class LastLine:
    """The last complete, non-blank line of a byte stream fed in pieces (a carriage return
    ends a line too: progress bars), without control characters, cut to 160 characters."""

    def __init__(self) -> None:
        self._partial = b""
        self.line: str | None = None
        self.at = 0.0
        """When it was seen (``time.time()``)."""

    def feed(self, chunk: bytes) -> None:
        *lines, self._partial = re.split(rb"[\r\n]", self._partial + chunk)
        self._partial = self._partial[-4096:]
        for raw in reversed(lines):
            text = _CONTROL.sub("", raw.decode("utf-8", "replace")).strip()
            if text:
                self.line = text[:_LINE_MAX] + ("…" if len(text) > _LINE_MAX else "")
                self.at = time.time()
                return


class ActivityWatch:
    """The agent's activity, updated at each pass of the harness's watch loop."""

    def __init__(
        self,
        *,
        harness: AleClient,
        run_id: str,
        traj: TrajectoryWriter,
        idle_after_s: float,
        access: AgentAccess | None,
        output: LastLine,
    ) -> None:
        self._harness = harness
        self._run_id = run_id
        self._traj = traj
        self._idle_after = idle_after_s
        self._access = access
        self._output = output
        self._last = time.time()
        self._evaluator_last = 0.0
        self._next_poll = 0.0
        self._polled = 0.0
        self._asking = True
        self._reported_stretch = False
        self.longest_idle_s = 0.0
        self.reported = False

    def update(self, *, frozen: bool) -> AgentActivity:
        now = time.time()
        past = self._past(self._idle(now, frozen))
        # The evaluator is asked every POLL_S, and before the agent is called idle: a call
        # it has not been asked about yet must not make an agent idle.
        fresh = self._asking and (now >= self._next_poll or (past and now - self._polled > 0.5))
        if fresh:
            self._next_poll, self._polled = now + POLL_S, now
            self._evaluator_last = self._ask_evaluator()
        idle = self._idle(now, frozen)
        if fresh or not self._asking:  # what is known for sure: the stretch so far
            self.longest_idle_s = max(self.longest_idle_s, idle)
        past = self._past(idle) and (fresh or not self._asking or self._reported_stretch)
        if past and not self._reported_stretch:
            self._reported_stretch = self.reported = True
            self._traj.append(
                "harness",
                "agent_idle",
                {
                    "idle_s": round(idle, 1),
                    "idle_after_s": self._idle_after,
                    "last_line": self._shown_line(),
                },
            )
        return AgentActivity(self._shown_line(), idle, past)

    def _idle(self, now: float, frozen: bool) -> float:
        model_last = self._access.last_call_unix() if self._access is not None else 0.0
        last = max(self._evaluator_last, model_last, now if frozen else 0.0)
        if last > self._last:
            self._last, self._reported_stretch = last, False
        return max(0.0, now - self._last)

    def _past(self, idle: float) -> bool:
        return self._idle_after > 0 and idle >= self._idle_after

    def _shown_line(self) -> str | None:
        refusal = self._access.last_refusal() if self._access is not None else None
        if refusal is not None and refusal[0] >= self._output.at:
            return f"model gateway refused: {refusal[1]}"
        return self._output.line

    def _ask_evaluator(self) -> float:
        try:
            reply = self._harness._call(
                self._harness.stub.GetRunActivity,
                pb.GetRunActivityRequest(run_id=self._run_id),
                timeout_s=POLL_S,
            )
        except UnimplementedError:  # an older evaluator: the model calls only
            self._asking = False
            return self._evaluator_last
        except AleError:  # an evaluator gone for a while: asked again at the next poll
            return self._evaluator_last
        return float(reply.last_agent_call_unix)
