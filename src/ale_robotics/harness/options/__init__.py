"""What one ``ale-robotics run`` is asked to do, declared once: the run options.

Every option of a run is one field of one group below, with its type, default,
validation, help text (its ``description``) and command-line flag (:class:`Flag`):

============================  ===========================================================
:class:`SandboxOptions`       how the agent is confined (``--sandbox``, its image, workspace)
:class:`ExecutorOptions`      what the embedded evaluator runs, and where (smoke episodes,
                              workers, ``--executor``)
:class:`LimitOptions`         the agent's budget and caps (wall clock, disk, log, CPU, memory)
:class:`ModelOptions`         the agent's model through the run's gateway (upstream, allowed
                              models, token budget)
:class:`EndpointOptions`      a separate evaluator to use instead (socket, tokens, volume,
                              state dir, an evaluator container)
:class:`RetryOptions`         how long an evaluator gone is waited out (:mod:`.retry`)
:class:`VideoOptions`         the evaluation videos (``--videos K``, ``--no-videos``), in
                              :mod:`.video`
:class:`OutputOptions`        where this run goes and what it is called (run dir, label,
                              ``--strict``)
============================  ===========================================================

Built from it: :class:`RunOptions` (:func:`..run.run_task`'s), :class:`RunSettings` (what
an eval set's SPEC sets for every run) and the ``run`` command's options (:mod:`.flags`).
Validation is here only: each field's rule in a validator, the rules between fields in
:meth:`RunSettings.check`; what needs the task or the disk, in :mod:`..preflight`.
"""

from ale_robotics.harness.options.agent import AgentOptions
from ale_robotics.harness.options.decl import Flag
from ale_robotics.harness.options.groups import (
    GROUPS,
    MIB,
    EndpointOptions,
    ExecutorOptions,
    LimitOptions,
    ModelOptions,
    OutputOptions,
    SandboxOptions,
)
from ale_robotics.harness.options.labels import (
    LABEL_MAX_LEN,
    check_label,
    default_label,
    new_run_id,
)
from ale_robotics.harness.options.run import RunOptions, RunSettings, default_state_dir, flag_of

from .retry import RetryOptions
from .video import VideoOptions

__all__ = [
    "GROUPS",
    "LABEL_MAX_LEN",
    "MIB",
    "AgentOptions",
    "EndpointOptions",
    "ExecutorOptions",
    "Flag",
    "LimitOptions",
    "ModelOptions",
    "OutputOptions",
    "RetryOptions",
    "RunOptions",
    "RunSettings",
    "SandboxOptions",
    "VideoOptions",
    "check_label",
    "default_label",
    "default_state_dir",
    "flag_of",
    "new_run_id",
]
