"""Read-from-task-config tasks (``mode: task_config``, e.g. ``edmp-v1``) on the harness side.

docs/architecture.md#tasks-that-read-their-config: the evaluator takes such a task's
inputs from the agent's
copy of the task config, and the harness triggers the evaluation when the agent
finishes. How the copy is handed over, concretely:

1. Before the agent starts, :func:`write_agent_copy` writes the agent-settable
   part of the task config (``planning.edmp.defaults``) as YAML into the
   submission directory, under the contract's one file name
   (``edmp_config.yaml``), with a header naming the fields the agent may change.
   The agent sees it at ``$ALE_SUBMISSION_DIR/edmp_config.yaml`` (and in
   ``GetSpec``), edits it in place or rewrites it, and exits.
2. After the agent exits (or is stopped at its budget), :func:`submit_agent_copy`
   calls ``SubmitBatchEval`` on the *harness* channel. The evaluator refuses that
   call from the agent channel for these tasks, and from the harness channel for
   every other task, so an agent cannot trigger, or repeat, the evaluation.
3. The evaluator snapshots the file like any submission and validates it against
   the allow-list and the schema (:func:`ale_robotics.planning.edmp_config.load_edmp_config`):
   an unknown key, a key that is not agent-settable, a wrong type or an
   out-of-range value ends the job ``REJECTED`` with a message naming the key.
   A missing file (the agent deleted it) is rejected the same way.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ale_robotics.client.sdk import AleClient
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import TrajectoryWriter
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["CLIENT_TOKEN", "submit_agent_copy", "write_agent_copy"]

CLIENT_TOKEN = "harness-task-config"
"""Idempotency key of the one submission the harness makes per run."""


def _agent_copy(task: TaskSpec) -> tuple[str, str]:
    """(file name, YAML text) of the agent's copy of ``task``'s settable config."""
    assert task.contract is not None
    name = next(iter(task.contract.files[0].names))
    if task.planning is None or task.planning.edmp is None:
        raise ValueError(f"task {task.id}: no agent-settable config is defined")
    edmp = task.planning.edmp
    header = (
        f"# {name}: your copy of {task.id}'s planner settings (from its task config).\n"
        "# Edit it and exit; the harness then submits it for evaluation on hidden seeds.\n"
        f"# Agent-settable keys: {', '.join(sorted(edmp.agent_settable))}.\n"
        "# Any other key must keep its value; ranges are in the task config's schema.\n"
    )
    body = yaml.safe_dump(edmp.defaults.model_dump(mode="json"), sort_keys=False)
    return name, header + body


def write_agent_copy(task: TaskSpec, submission: Path) -> Path | None:
    """Write the agent's copy into the submission directory (task_config tasks only).

    An existing file is left alone (an evaluator started separately may share a
    volume the operator prepared). Returns the path, or None for other modes.
    """
    if task.mode is not TaskMode.TASK_CONFIG:
        return None
    name, text = _agent_copy(task)
    path = submission / name
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path


def submit_agent_copy(
    harness: AleClient, task: TaskSpec, run_id: str, traj: TrajectoryWriter
) -> str | None:
    """Ask the evaluator to evaluate the agent's copy; the job id (None for other modes)."""
    if task.mode is not TaskMode.TASK_CONFIG:
        return None
    request = pb.SubmitBatchEvalRequest(
        task_id=task.id, run_id=run_id, submission_path="", client_token=CLIENT_TOKEN
    )
    r = harness._call(harness.stub.SubmitBatchEval, request, retries=3)
    traj.append("harness", "task_config_submitted", {"job_id": r.job_id})
    return str(r.job_id)
