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
network namespace (see :class:`~ale_robotics.evaluator.execution.base.WorkerLimits`).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from ale_robotics.planning.ompl_planner import PlanAttempt
from ale_robotics.planning.planner_config import PlannerConfig
from ale_robotics.planning.scenes import Problem

__all__ = ["PlannerPool", "serve_planner"]

_STOP_WAIT_S = 5.0
"""How long a cancelled loser may take to answer before it is killed too."""
_START_S = 120.0
"""How long a new planner process may take to import its libraries and load the robot."""
READY = "ready"
"""What a planner process sends once it can take problems (start-up is not planning time)."""


def serve_planner(conn: Connection, cancel: Any, index: int) -> None:
    """A planner process: answer ``(problem, config)`` requests until ``None`` arrives."""
    from ale_robotics.planning.ompl_planner import plan_with_ompl, quiet_ompl
    from ale_robotics.planning.world import CollisionWorld

    quiet_ompl(seed=1 + index)
    with CollisionWorld() as world:
        conn.send(READY)
        while True:
            msg = conn.recv()
            if msg is None:
                return
            problem, cfg = msg
            world.set_scene(problem.boxes)
            conn.send(plan_with_ompl(world, problem, cfg, cancel.is_set))


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
                target=self._target, args=(child_conn, cancel, i), name=f"ale-planner-{i}"
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

    def solve(self, problem: Problem, cfg: PlannerConfig, grace_s: float) -> PlanAttempt:
        """The first exact solution among the children, or the best failure to report.

        ``elapsed_s`` is the winner's own planning time; without a winner, the
        longest time any child was given (its time limit plus the grace when it
        had to be killed).
        """
        children = [self._child(i) for i in range(len(self._children))]
        for c in children:
            c.cancel.clear()
            c.conn.send((problem, cfg))
        sent = time.monotonic()
        deadline = sent + cfg.time_limit_s + grace_s
        waiting = {id(c.conn): i for i, c in enumerate(children)}
        answers: list[PlanAttempt] = []
        winner: PlanAttempt | None = None
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for conn in wait([children[i].conn for i in waiting.values()], timeout=left):
                assert isinstance(conn, Connection)
                i = waiting.pop(id(conn))
                try:
                    attempt: PlanAttempt = conn.recv()
                except (EOFError, OSError):  # the child died (a crash in native code)
                    self._kill(i)
                    answers.append(PlanAttempt(False, None, time.monotonic() - sent, "crashed"))
                    continue
                answers.append(attempt)
                if attempt.solved and winner is None:
                    winner = attempt
                    for c in children:
                        c.cancel.set()
                    deadline = min(deadline, time.monotonic() + _STOP_WAIT_S)
        for i in list(waiting.values()):
            self._kill(i)
            answers.append(
                PlanAttempt(False, None, time.monotonic() - sent, "killed past its time limit")
            )
        if winner is not None:
            return winner
        return max(answers, key=lambda a: a.elapsed_s)

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
