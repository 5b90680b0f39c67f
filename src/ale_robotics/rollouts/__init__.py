"""Rollout kinds: how a batch task's episodes are produced, one folder per kind.

::

    policy.PolicyRolloutKind    defaults of the kinds that roll out the contract's MLP
    ├── gymnasium/              Gymnasium envs stepped in the worker
    ├── mujoco_rollout/         a shard's physics stepped together by mujoco.rollout
    └── mjx/                    a shard's physics stepped on an accelerator by MuJoCo XLA
    replay/                     submitted action sequences replayed open-loop
    planning/                   "planner" (OMPL) and "edmp" on hidden-seed scenes
    weights                     the safe loader of submitted policy weights

Every kind implements :class:`ale_robotics.model.rollout_kind.RolloutKind` and is
found by name through :func:`ale_robotics.model.kind_registry.get_kind` (the entry
points "ale_robotics.rollout_kinds"). The interface and the registry sit in the
bottom layer (:mod:`ale_robotics.model`), below the task model that validates a
config through them, so nothing outside this package imports it: the evaluator
sees a kind only through the interface.
"""
