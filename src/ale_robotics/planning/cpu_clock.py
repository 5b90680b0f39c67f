"""CPU time for planning: what a planner process used, read from inside and from outside.

Why CPU time (issue 27): a planner's wall-clock time stretches with whatever else the
host runs. At a load of ~12, ``panda-planner-config-v1`` (timed and stopped by the
wall clock) solved 34/40 problems where a quiet host solves 40/40, so its success
condition moved with the neighbours. The CPU time a process gets for its
own work does not stretch that way (it still depends on the CPU model, which the
result records, and on what the neighbours do to the caches: beside 3 x cpu_count busy
loops it grew by 17-35% in ``tests/planning/test_planner_under_load.py``'s problems).
So from ``planning.clock: cpu`` on, the planner is stopped and timed by CPU time:

* **inside** the planner process, :func:`cpu_seconds` (``time.process_time``: all
  threads of the process, user + system, nanosecond resolution) around the attempt,
  and :class:`CpuBudget`, the Python callable OMPL's termination condition calls
  (:mod:`.ompl_planner`);
* **outside**, the owner of the process (:mod:`.planner_procs`) reads the child's
  CPU time with :func:`process_cpu_seconds` (``/proc/<pid>/stat``: ``utime +
  stime``, in clock ticks, usually 10 ms) and kills a child past its budget plus
  the grace, however the child misbehaves. A child that hangs without using CPU (a
  deadlock) is told from a starved one by its scheduler state, :func:`process_stat`:
  a starved child is runnable (``R``) and waits for a CPU, a hung one sleeps while its
  CPU time stands still, and the time it spends so counts against the same budget.
  (Not the kernel's run-queue delay, ``/proc/<pid>/schedstat``: it is added only when
  the waiting task next runs, so a long wait looks like time the child had; and on a
  host where another session's autogroup runs at nice -20 a planner waited seconds.)

The wall clock stays beside it: reported (``planning_wall_time``) and, as a generous
backstop, a multiple of the budget (:func:`wall_backstop_s`) past which a starved
host fails the job as an infrastructure failure, never as an unsolved problem.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Literal

__all__ = [
    "WALL_BACKSTOP_FACTOR",
    "WALL_BACKSTOP_MIN_S",
    "Clock",
    "CpuBudget",
    "cpu_seconds",
    "process_cpu_seconds",
    "process_stat",
    "wall_backstop_s",
]

Clock = Literal["wall", "cpu"]
"""How a planning task times and stops its planner (the task config's ``planning.clock``)."""

WALL_BACKSTOP_FACTOR = 10.0
"""The wall-clock backstop is this many times the CPU budget (with the grace)."""
WALL_BACKSTOP_MIN_S = 60.0
"""... and never less than this, so that a short budget survives an ordinary busy host."""

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds() -> float:
    """This process's CPU time (user + system, every thread), in seconds."""
    return time.process_time()


def process_stat(pid: int) -> tuple[float, str] | None:
    """Process ``pid``'s CPU time so far (user + system, every thread, seconds) and its
    main thread's scheduler state (``R`` runnable, ``S`` or ``D`` asleep, ...); None once
    it is gone.

    Read from ``/proc/<pid>/stat`` (fields 3, 14 and 15 of proc(5), after the
    parenthesised command name, which may itself hold spaces or parentheses), so the
    CPU time's resolution is one clock tick (``SC_CLK_TCK``, usually 100 per second).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    # fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK, fields[0].decode("ascii")


def process_cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of process ``pid`` so far, in seconds; None once it is gone
    (:func:`process_stat`)."""
    stat = process_stat(pid)
    return None if stat is None else stat[0]


def wall_backstop_s(budget_s: float) -> float:
    """The wall-clock time after which a planner still within its CPU ``budget_s`` counts as
    starved by its host (an infrastructure failure, not the planner's)."""
    return max(WALL_BACKSTOP_MIN_S, WALL_BACKSTOP_FACTOR * budget_s)


class CpuBudget:
    """True once ``budget_s`` of this process's CPU time has passed since it was made, or
    ``stop()`` is true: the callable of an OMPL ``PlannerTerminationCondition``.

    OMPL calls it on every planner iteration, from the solving thread; one call costs
    about 0.8 µs (``process_time`` is ~0.55 µs of it), against tens of microseconds for
    each Python validity check the iteration makes, so it checks on every call rather
    than every n-th (which would overrun by n iterations).
    """

    def __init__(
        self, budget_s: float, stop: Callable[[], bool] = lambda: False, now: float | None = None
    ) -> None:
        self.start = cpu_seconds() if now is None else now
        self.deadline = self.start + budget_s
        self.stop = stop

    def __call__(self) -> bool:
        return cpu_seconds() >= self.deadline or self.stop()
