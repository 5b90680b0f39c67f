"""A control loop's own timing, per episode: what a kind that runs the policy as a controller
in real time (``ros``) measures beside the return.

Plain data in the bottom layer, like :mod:`.episode` (whose :class:`~.episode.EpisodeOutcome`
carries it from a worker to the result) and :mod:`.outcomes` (whose record stores it).

Two kinds of fields. The *hold schedule* (which steps applied an older command than their
own, and which) is what the timing changed in the episode: with the seed and the weights
it determines the physics, so a re-run that imposes it gets the same episode to the bit
(an audit compares it exactly). Everything else (latencies, late and missing counts, the
graph's start, the ticks' lag) is the host's timing: re-measured and shown, never compared.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ControlLoop", "HoldRun"]

HoldRun = tuple[int, int, int]
"""``(first step, steps, command sequence)``: steps that applied the command of an earlier
step (``-1``: the null command, none received yet)."""


@dataclass(frozen=True)
class ControlLoop:
    """One episode's control loop (see the module docstring)."""

    holds: tuple[HoldRun, ...]
    """The hold schedule, as runs (empty: every step applied its own command)."""
    late: int
    """Commands that came after the tick that should have applied them."""
    missing: int
    """Commands that never came (the controller fell behind, hung or died)."""
    latency_p50_us: float | None
    """Median observation-to-command latency of the commands received (microseconds)."""
    latency_p99_us: float | None
    """Its 99th percentile."""
    latency_max_us: float | None
    """Its maximum."""
    max_tick_lag_us: float
    """Most a control tick started after its time (the simulator's own lateness)."""
    graph_start_s: float
    """Seconds from starting the graph to its first control tick."""

    @property
    def held_steps(self) -> int:
        """Steps that applied an older command than their own."""
        return sum(count for _, count, _ in self.holds)
