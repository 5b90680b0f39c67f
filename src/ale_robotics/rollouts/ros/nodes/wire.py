"""What the graph's nodes say to each other: topics, message layouts, the episode's files.

Only ``std_msgs`` travels (Debian's ROS 1 has no message generator here, and a custom
message would need one): a ``Float64MultiArray`` whose first element is the control
step the message belongs to (its *sequence*; float64 holds every integer up to 2**53
exactly), then the payload, and one ``String`` of JSON for the episode's end. Observations
are float64 as Gymnasium makes them and commands float32 as the policy makes them, both
exact in float64, so what crosses the graph is bit for bit what the ``gymnasium`` kind
hands from env to policy and back.

::

    sim ──/ale/observation [seq, obs...]──────────► policy
    sim ◄─/ale/command [seq, action...]──────────── policy
    sim ──/ale/telemetry [step, reward, terminated, truncated, applied, tick]──► recorder
    sim ──/ale/episode_end JSON (timing, fault)──────────────────────────────► recorder

The episode's directory (made by :mod:`..graph`, read by every node) holds ``task.json``,
``params.json`` (:class:`EpisodeParams`), ``policy.safetensors`` and, written last by the
recorder, ``episode.json`` (:class:`EpisodeRecord`). Plain data, no rospy: the runner and
the nodes share it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "COMMAND",
    "END",
    "OBSERVATION",
    "PARAMS",
    "POLICY_FILE",
    "RECORD",
    "TASK",
    "TELEMETRY",
    "TELEMETRY_FIELDS",
    "EpisodeParams",
    "EpisodeRecord",
    "Fault",
    "LoopTiming",
]

OBSERVATION = "/ale/observation"
COMMAND = "/ale/command"
TELEMETRY = "/ale/telemetry"
END = "/ale/episode_end"

TASK = "task.json"
PARAMS = "params.json"
POLICY_FILE = "policy.safetensors"
RECORD = "episode.json"

TELEMETRY_FIELDS = ("step", "reward", "terminated", "truncated", "applied", "tick")
"""One telemetry message per control step: the step (from 0), its reward, the two flags
(0/1), the sequence of the command applied (``-1``: none received yet, the null command),
and the monotonic time of the tick that applied it."""


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EpisodeParams(_Doc):
    """What the nodes of one episode's graph are told (``params.json``)."""

    index: int = Field(description="The episode's position in the task's base seeds.")
    seed: int = Field(description="The env's reset seed (a hidden seed: never logged).")
    period_s: float = Field(description="The control period: the env's dt (Hopper: 0.008 s).")
    action_high: list[float] = Field(description="The env's action bound, the policy's scale.")
    start_timeout_s: float = Field(description="How long the sim waits for the graph to connect.")
    replay: list[tuple[int, int, int]] | None = Field(
        default=None,
        description="None: a live episode, each step applying the newest command received by "
        "its tick. Else the hold schedule to replay ([first step, steps, command sequence] "
        "runs, schedule.py): each step waits for the command the schedule names.",
    )


class Fault(_Doc):
    """A non-finite value the policy's command made (the submission's failure)."""

    what: str = Field(description="'action' or 'reward'.")
    value: str = Field(description="The first non-finite value ('nan', 'inf', '-inf').")
    step: int = Field(description="The control step, from 1 (as the other kinds count).")


class LoopTiming(_Doc):
    """The control loop's own timing, measured by the sim (host- and load-dependent)."""

    loop_start: float = Field(description="Monotonic time of the first tick.")
    received: int = Field(description="Commands received (on time or late).")
    late: int = Field(description="Commands received after the tick that should apply them.")
    latency_us: list[float] = Field(
        description="Observation published -> its command received, per command received "
        "(microseconds), in step order."
    )
    max_tick_lag_us: float = Field(description="Most a tick started after its time.")


class EpisodeRecord(_Doc):
    """What the recorder writes once the episode ended (``episode.json``)."""

    index: int
    episode_return: float = Field(description="Sum of the rewards in step order.")
    length: int = Field(description="Control steps simulated.")
    terminated: bool
    applied: list[int] = Field(description="The command sequence each step applied.")
    timing: LoopTiming
    fault: Fault | None = None
