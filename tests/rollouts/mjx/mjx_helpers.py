"""Tasks for the ``mjx`` kind's tests: bundled tasks re-pointed at another kind, short episodes.

No bundled task uses ``mjx`` (it is an optional extra); these tests run the bundled
HalfCheetah and InvertedPendulum tasks through it, validated as configs of the kind
(``TaskSpec.model_validate``, so the kind's ``check_task`` runs), next to the same task
on the kind they are compared with.
"""

from __future__ import annotations

import json
from typing import Any

from ale_robotics.tasks import TaskSpec, default_registry

CHEETAH = "td3-halfcheetah-vec-v1"
PENDULUM = "td3-inverted-pendulum-v2"


def task_as(task_id: str, backend: str, steps: int | None = None) -> TaskSpec:
    """The bundled task ``task_id`` with ``eval.backend = backend`` and, if given, a step limit.

    ``eval.threads`` is a setting of the ``mujoco_rollout`` kind only; it is dropped (default)
    for any other kind, and kept (the task's value) for that one.
    """
    doc: dict[str, Any] = json.loads(default_registry().entry(task_id).raw)
    doc["eval"]["backend"] = backend
    if backend != "mujoco_rollout":
        doc["eval"].pop("threads", None)
    if steps is not None:
        doc["env"]["max_episode_steps"] = steps
    return TaskSpec.model_validate(doc)


WALKER = "td3-walker2d-repro-v2"


def hopper_as(backend: str) -> TaskSpec:
    """No bundled batch task runs Hopper (its task is interactive): the Walker2d task's
    protocol and TD3 policy on Hopper-v5, the contract's tensors resized to its
    observation (11) and action (3)."""
    doc: dict[str, Any] = json.loads(default_registry().entry(WALKER).raw)
    doc["id"] = "mjx-test-hopper-v1"
    doc["env"]["gym_id"] = "Hopper-v5"
    doc["eval"]["backend"] = backend
    if backend != "mujoco_rollout":
        doc["eval"].pop("threads", None)
    shapes = {"l1.weight": [400, 11], "l3.weight": [3, 300], "l3.bias": [3]}
    for tensor in doc["contract"]["tensors"]:
        tensor["shape"] = shapes.get(tensor["key"], tensor["shape"])
    return TaskSpec.model_validate(doc)
