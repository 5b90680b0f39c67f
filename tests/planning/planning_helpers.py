"""Stand-in planner processes for the PlannerPool tests (importable as ``planning_helpers``).

They speak the real protocol (READY, then one PlanAttempt per problem) but misbehave on
purpose, keyed on the problem's scene type: "dresser" hangs (asleep, using no CPU), "cubby"
crashes the process, "merged_cubby" burns CPU forever; a start of all ones answers that the
host starved it.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ale_robotics.planning.ompl_planner import STARVED, PlanAttempt
from ale_robotics.planning.planner_procs import READY


def misbehaving(conn: Connection, cancel: Any, index: int) -> None:
    conn.send(READY)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        problem, _cfg, _clock = msg
        if problem.scene_type == "dresser":
            time.sleep(3600)  # a planner that ignores its time limit
        if problem.scene_type == "cubby":
            os._exit(3)  # a crash in native code
        if problem.scene_type == "merged_cubby":
            while True:  # a planner that ignores its time limit and computes
                pass
        if problem.start[0] == 1.0:
            conn.send(PlanAttempt(False, None, 60.0, STARVED, 0.01))
            continue
        conn.send(PlanAttempt(True, np.array([problem.start, problem.goal]), 0.01, "ok"))


def racing(conn: Connection, cancel: Any, index: int) -> None:
    """Process 0 solves at once; process 1 only stops when told to (the loser)."""
    conn.send(READY)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        problem, _cfg, _clock = msg
        if index == 0:
            conn.send(PlanAttempt(True, np.array([problem.start, problem.goal]), 0.02, "won"))
            continue
        t0 = time.perf_counter()
        while not cancel.is_set():
            time.sleep(0.01)
        conn.send(PlanAttempt(False, None, time.perf_counter() - t0, "cancelled"))


def spin() -> None:
    """A process that only computes (for the CPU-time readings)."""
    while True:
        pass
