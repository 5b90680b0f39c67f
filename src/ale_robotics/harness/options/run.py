"""A run's options whole: :class:`RunSettings` (what an eval set sets for each of its runs),
:class:`RunOptions` (one run), the rules between their groups, and the state dir default."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options.agent import AgentOptions
from ale_robotics.harness.options.decl import Flag
from ale_robotics.harness.options.groups import (
    EndpointOptions,
    ExecutorOptions,
    LimitOptions,
    ModelOptions,
    OutputOptions,
    SandboxOptions,
)
from ale_robotics.harness.options.retry import RetryOptions
from ale_robotics.harness.options.video import VideoOptions
from ale_robotics.paths import state_home
from ale_robotics.sandboxes.registry import (
    sandboxes_taking,
    takes_option,
)


def default_state_dir() -> Path:
    """Where an embedded evaluator keeps its secret and keys: outside any run directory."""
    return state_home() / "evaluator"


class RunSettings(
    SandboxOptions,
    AgentOptions,
    ExecutorOptions,
    LimitOptions,
    ModelOptions,
    EndpointOptions,
    RetryOptions,
    VideoOptions,
):
    """The options one setting of which holds for many runs: every group but the output.

    An eval set's SPEC has one key per field (:mod:`ale_robotics.evalset.spec`).
    """

    def check(self) -> None:
        """The rules between options, raising :class:`InvalidArgumentError` naming the flags.

        Each field's own rule runs when the options are made; these run before anything
        starts (the ``run`` command, an eval set's SPEC, :func:`ale_robotics.harness.run.run_task`).
        """
        if self.ray_address is not None and self.executor != "ray":
            raise InvalidArgumentError("--ray-address goes with --executor ray")
        if self.evaluator is not None and (self.executor != "local" or self.ray_address):
            raise InvalidArgumentError(
                "a running evaluator (--evaluator) has its own executor: start it with "
                "'ale-robotics evaluator serve --executor ray'"
            )
        if self.episodes is not None and self.evaluator is not None:
            raise InvalidArgumentError(
                "--episodes makes the embedded evaluator run a smoke run; an evaluator "
                "started separately always runs the task's full protocol"
            )
        for name in SandboxOptions.model_fields.keys() - {"sandbox", "workspace"}:
            # A sandbox's own option (docker's image): only with a sandbox that takes it.
            if getattr(self, name) is not None and not takes_option(self.sandbox, name):
                which = " or ".join(sandboxes_taking(name)) or "no installed sandbox"
                raise InvalidArgumentError(f"{flag_of(name).name} goes with --sandbox {which}")
        if self.model_upstream is None and (
            self.models or self.model_budget_tokens or self.model_allow_tools
        ):
            raise InvalidArgumentError(
                "--model, --model-budget-tokens and --model-allow-tool go with --model-upstream URL"
            )
        if self.model_upstream is not None and not self.models:
            raise InvalidArgumentError(
                "--model-upstream needs at least one --model NAME (the models the agent may use)"
            )
        self._check_evaluator_image()

    def _check_evaluator_image(self) -> None:
        if self.evaluator_image is None:
            return
        if self.evaluator is not None:
            raise InvalidArgumentError(
                "--evaluator-image starts an evaluator container for the run; --evaluator "
                "uses one that is already running: give one of them"
            )
        if self.episodes is not None:
            raise InvalidArgumentError(
                "--episodes makes the embedded evaluator run a smoke run; an evaluator "
                "container (--evaluator-image) always runs the task's full protocol"
            )
        if self.executor != "local":
            raise InvalidArgumentError(
                "--executor ray is for the embedded evaluator; an evaluator container runs "
                "its rollouts in local worker processes"
            )


class RunOptions(RunSettings, OutputOptions):
    """One run: the task, the agent command, and every option (see the module docstring).

    ``run_id``, ``runs_root`` and ``job_timeout_s`` are no options of the ``run``
    command: the program that starts a run sets them (the command: a new id and
    ``./runs``; tests: their own).
    """

    task_id: Annotated[str, Flag("task_id", argument=True)] = Field(
        description="Task id, e.g. td3-inverted-pendulum-v2."
    )
    agent_cmd: Annotated[str, Flag("--agent")] = Field(description="Command that starts the agent.")
    run_id: str | None = None
    """The run's id (None: a new one, :func:`new_run_id`)."""
    runs_root: Path | None = None
    """Where ``<run_id>/`` is created when ``run_dir`` is not given (default: ./runs)."""
    job_timeout_s: float = 900.0
    """The embedded evaluator's deadline for one job."""

    def __init__(self, task_id: str, agent_cmd: str, **options: Any) -> None:
        BaseModel.__init__(self, task_id=task_id, agent_cmd=agent_cmd, **options)


def flag_of(name: str) -> Flag:
    """The :class:`Flag` of the run option ``name`` (KeyError: it has none)."""
    for meta in RunOptions.model_fields[name].metadata:
        if isinstance(meta, Flag):
            return meta
    raise KeyError(name)
