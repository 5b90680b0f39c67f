"""The bottom layer: plain data every other layer shares, importing nothing of ours.

::

    episode         EpisodeOutcome, PolicyFault: one episode's outcome, a policy's fault
    states          JobState, FailureSource: a job's lifecycle and who a failure is on
    snapshot        SnapshotFile: one frozen submission file
    result          EvalResult and its records (episodes, per-kind outcomes, host, timings)
    rollout_kind    RolloutKind: the interface every rollout kind implements
    kind_registry   the installed kinds by name (entry points "ale_robotics.rollout_kinds")
    video           VideoIndex: a run's evaluation videos (videos/videos.json)

Rollout kinds (:mod:`ale_robotics.rollouts`), the task model (:mod:`ale_robotics.tasks`)
and the evaluator all import from here, and this package imports none of them at run
time (only under ``TYPE_CHECKING``, for annotations), so no layer above has to import
a sibling's internals to name a record. The rollout interface and its registry sit
here, not with the kinds, because the task model validates a config through them and
the kinds import the task model. Layering: ``.importlinter`` and
``scripts/check_package_cycles.py`` (both in ``make lint``).
"""
