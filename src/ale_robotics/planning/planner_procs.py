"""Planner processes owned by a rollout worker: 1-2 per worker, killed when they overrun.

Why processes and not a call in the worker: OMPL runs native code that Python
cannot interrupt, and some planners can block forever (``PRM`` in the ``ompl``
2.0.1 bindings deadlocks: its roadmap thread calls the Python validity checker
while ``solve`` holds the GIL; that is why it is not on the allow-list). Each
planner therefore runs in a spawned child of the rollout worker, which waits at
most ``time_limit_s + grace_s`` for an answer; a child that has not answered by
then is killed and replaced, and its problem counts as unsolved with the time it
was given. The job always completes.

With ``parallel_processes = 2`` both children get the same problem (each has its
own OMPL random stream); the first exact solution wins, the other child is told
to stop through a shared flag its termination condition reads, and its answer
is collected and dropped. Children inherit the worker's resource limits and
network namespace (see :class:`~ale_robotics.evaluator.execution.base.WorkerLimits`),
and die with it (:func:`_child_main`): a worker killed mid-problem leaves no planner
behind, however long it would have planned or hung.

**Clocks.** With the task's ``planning.clock: wall`` (``panda-planner-config-v1``)
the limits above are wall-clock seconds. With ``cpu`` (from v2) they are the
child's CPU seconds: the child stops itself on its own CPU time, and this side
reads the child's CPU time from ``/proc`` every :data:`_POLL_S` and kills it past
``time_limit_s + grace_s`` of it (:mod:`.cpu_clock`), so a loaded host slows a
planner down without failing it. A child that hangs without using CPU is killed
once it has slept (not runnable, its CPU time standing still) for as long as the same
budget.
Only when a child is still within its budget after
:func:`~.cpu_clock.wall_backstop_s` of wall time does the job fail, with
:class:`PlannerStarved`: an infrastructure failure (the evaluator retries the job),
never an unsolved problem.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from ale_robotics.planning.cpu_clock import (
    Clock,
    process_stat,
    wall_backstop_s,
)
from ale_robotics.planning.ompl_planner import STARVED, PlanAttempt
from ale_robotics.planning.planner_config import PlannerConfig
from ale_robotics.planning.scenes import Problem

__all__ = ["PlannerPool", "PlannerStarved", "serve_planner"]

_STOP_WAIT_S = 5.0
"""How long a cancelled loser may take to answer before it is killed too."""
_START_S = 120.0
"""How long a new planner process may take to import its libraries and load the robot."""
READY = "ready"
"""What a planner process sends once it can take problems (start-up is not planning time)."""
_POLL_S = 0.05
"""How often the children's CPU time is read (``cpu`` clock)."""


_PR_SET_PDEATHSIG = 1


class PlannerStarved(RuntimeError):
    """A planner process got too little CPU: still within its CPU budget after the
    wall-clock backstop. The host's failure, not the planner's (the job is retried)."""


def serve_planner(conn: Connection, cancel: Any, index: int) -> None:
    """A planner process: answer ``(problem, config, clock)`` requests until ``None`` arrives."""
    from ale_robotics.planning.ompl_planner import plan_with_ompl, quiet_ompl
    from ale_robotics.planning.world import CollisionWorld

    quiet_ompl(seed=1 + index)
    with CollisionWorld() as world:
        conn.send(READY)
        while True:
            msg = conn.recv()
            if msg is None:
                return
            problem, cfg, clock = msg
            world.set_scene(problem.boxes)
            conn.send(plan_with_ompl(world, problem, cfg, cancel.is_set, clock))


def _child_main(
    target: Callable[[Connection, Any, int], None], conn: Connection, cancel: Any, index: int
) -> None:
    """A planner process: killed (SIGKILL) when its rollout worker dies, then ``target``.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that started the child ends: here the
    thread running the shard, which outlives the pool (:meth:`PlannerPool.close` runs in
    it, in the shard's ``finally``). A planner blocked in native code (OMPL ignoring its
    time limit, a deadlocked ``PRM``) never reads the pipe's EOF, so without it a worker
    killed mid-problem would leave it running for good. A parent that died before the
    ``prctl`` is noticed by its pid (the one on the spawn command line).
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        spawner = mp.parent_process()
        if spawner is not None and spawner.pid and os.getppid() != spawner.pid:
            os._exit(1)
    target(conn, cancel, index)


@dataclass
class _Child:
    proc: Any
    conn: Connection
    cancel: Any


class PlannerPool:
    """``n`` planner processes, started lazily and restarted after a kill."""

    def __init__(
        self, n: int, target: Callable[[Connection, Any, int], None] = serve_planner
    ) -> None:
        self._ctx = mp.get_context("spawn")
        self._target = target
        self._children: list[_Child | None] = [None] * n

    def _child(self, i: int) -> _Child:
        child = self._children[i]
        if child is None or not child.proc.is_alive():
            parent_conn, child_conn = self._ctx.Pipe()
            cancel = self._ctx.Event()
            proc = self._ctx.Process(
                target=_child_main,
                args=(self._target, child_conn, cancel, i),
                name=f"ale-planner-{i}",
            )
            proc.start()
            child_conn.close()
            child = _Child(proc, parent_conn, cancel)
            self._children[i] = child
            try:
                ready = parent_conn.poll(_START_S) and parent_conn.recv() == READY
            except (EOFError, OSError):
                ready = False
            if not ready:
                self._kill(i)
                raise RuntimeError(f"planner process {i} did not start")
        return child

    def _kill(self, i: int) -> None:
        child = self._children[i]
        if child is not None:
            child.proc.kill()
            child.proc.join(timeout=5)
            child.conn.close()
        self._children[i] = None

    def warm_up(self) -> None:
        """Start every child now, so process start-up is not charged to the first problem."""
        for i in range(len(self._children)):
            self._child(i)

    def solve(
        self, problem: Problem, cfg: PlannerConfig, grace_s: float, clock: Clock = "wall"
    ) -> PlanAttempt:
        """The first exact solution among the children, or the best failure to report.

        A winner is reported with its own times. Without one, the attempt that used the
        most time on ``clock`` (a killed child: what it used, its time limit plus the
        grace). Raises :class:`PlannerStarved` (``cpu`` clock) when the host starved it.
        """
        children = [self._child(i) for i in range(len(self._children))]
        race = _Race(children, cfg.time_limit_s + grace_s, clock)
        for c in children:
            c.cancel.clear()
            c.conn.send((problem, cfg, clock))
        race.start()
        while race.waiting:
            left = race.next_wake()
            if left <= 0:
                break
            ready = wait([children[i].conn for i in race.waiting], timeout=left)
            for conn in ready:
                assert isinstance(conn, Connection)
                i = next(i for i in race.waiting if children[i].conn is conn)
                try:
                    attempt: PlanAttempt = conn.recv()
                except (EOFError, OSError):  # the child died (a crash in native code)
                    self._kill(i)
                    attempt = race.lost(i, "crashed")
                race.answered(i, attempt)
            for i, status in race.over_cpu_budget():
                self._kill(i)
                race.answered(i, race.lost(i, status))
        starved = race.winner is None and clock == "cpu" and bool(race.waiting)
        for i in list(race.waiting):
            self._kill(i)
            race.answered(i, race.lost(i, "killed past its time limit"))
        if starved or any(a.status == STARVED for a in race.answers):
            raise PlannerStarved(
                f"a planner process was still within its {cfg.time_limit_s:g} s CPU time limit "
                f"after {race.backstop:.0f} s of wall clock: the host is overloaded"
            )
        if race.winner is not None:
            return race.winner
        key = (lambda a: a.cpu_s or 0.0) if clock == "cpu" else (lambda a: a.elapsed_s)
        return max(race.answers, key=key)

    def close(self) -> None:
        for i, child in enumerate(self._children):
            if child is None:
                continue
            try:
                child.conn.send(None)
                child.proc.join(timeout=2)
            except (BrokenPipeError, OSError):
                pass
            if child.proc.is_alive():
                self._kill(i)
            else:
                child.conn.close()
            self._children[i] = None


class _Race:
    """The bookkeeping of one :meth:`PlannerPool.solve`: who is still planning, the
    answers, the winner, and the deadlines on both clocks."""

    def __init__(self, children: list[_Child], budget_s: float, clock: Clock) -> None:
        self.children = children
        self.budget_s = budget_s
        """The time limit plus the grace, on ``clock``."""
        self.clock = clock
        self.backstop = wall_backstop_s(budget_s) if clock == "cpu" else budget_s
        self.waiting: list[int] = list(range(len(children)))
        self.answers: list[PlanAttempt] = []
        self.winner: PlanAttempt | None = None
        self.cpu0: list[float] = []
        self.cpu: list[float] = []
        self.asleep: list[float] = []
        """Seconds each child was seen asleep with its CPU time standing still."""

    def start(self) -> None:
        self.sent = time.monotonic()
        self.deadline = self.sent + self.backstop
        self.cpu0 = [_cpu(process_stat(c.proc.pid)) for c in self.children]
        self.cpu = [0.0] * len(self.children)
        self.asleep = [0.0] * len(self.children)
        self.polled = self.sent

    def next_wake(self) -> float:
        """Seconds until the next look: the wall deadline, or the next CPU-time poll."""
        left = self.deadline - time.monotonic()
        return min(left, _POLL_S) if self.clock == "cpu" and self.winner is None else left

    def answered(self, i: int, attempt: PlanAttempt) -> None:
        self.waiting.remove(i)
        self.answers.append(attempt)
        if attempt.solved and self.winner is None:
            self.winner = attempt
            for c in self.children:
                c.cancel.set()
            self.deadline = min(self.deadline, time.monotonic() + _STOP_WAIT_S)

    def lost(self, i: int, status: str) -> PlanAttempt:
        """What child ``i`` gets when it did not answer: the time it used (wall clock) or
        was last seen using (CPU time)."""
        cpu = self.cpu[i] if self.clock == "cpu" else None
        return PlanAttempt(False, None, time.monotonic() - self.sent, status, cpu)

    def over_cpu_budget(self) -> list[tuple[int, str]]:
        """Children past their budget (``cpu`` clock, while no one has won), with why: the
        CPU time they used, or the time they slept without computing (hung, not starved:
        a starved child is runnable)."""
        if self.clock != "cpu" or self.winner is not None:
            return []
        now = time.monotonic()
        since, self.polled = now - self.polled, now
        over = []
        for i in self.waiting:
            stat = process_stat(self.children[i].proc.pid)
            if stat is not None:
                used = stat[0] - self.cpu0[i]
                if used <= self.cpu[i] and stat[1] != "R":
                    self.asleep[i] += since
                self.cpu[i] = used
            if self.cpu[i] >= self.budget_s:
                over.append((i, "killed past its CPU time limit"))
            elif self.asleep[i] >= self.budget_s:
                over.append((i, "killed past its time limit without using the CPU (hung)"))
        return over


def _cpu(stat: tuple[float, str] | None) -> float:
    return 0.0 if stat is None else stat[0]
