"""The run options' groups (see :mod:`ale_robotics.harness.options`): each field one option,
with its type, default, validation, help text and flag."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from ale_robotics.harness.options.agent import AgentOptions
from ale_robotics.harness.options.decl import Flag, OptionGroup
from ale_robotics.harness.options.labels import LABEL_MAX_LEN, LABEL_OK, LABEL_RULE
from ale_robotics.harness.options.retry import RetryOptions
from ale_robotics.harness.options.tls import TlsOptions
from ale_robotics.harness.options.video import VideoOptions
from ale_robotics.sandboxes.registry import (
    AUTO,
    check_sandbox_name,
    sandbox_choices,
)

# --- The declaration -----------------------------------------------------------------

MIB = 1024**2


EXECUTORS = ("local", "ray")
"""Where an embedded evaluator runs its rollouts (:mod:`ale_robotics.evaluator.execution`)."""


def _executors() -> Sequence[str]:
    return EXECUTORS


def _choice(value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        names = [repr(c) for c in choices]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise ValueError(f"use {listed}")
    return value


def _whole_mib(value: int | None) -> int | None:
    if value is not None and value % MIB:
        raise ValueError(f"{value} bytes is not a whole number of MiB (the run command's unit)")
    return value


_Group = OptionGroup


class SandboxOptions(_Group):
    """How the agent is confined (:mod:`ale_robotics.sandboxes`)."""

    sandbox: Annotated[str, Flag("--sandbox", choices=sandbox_choices)] = Field(
        default=AUTO,
        description="Agent isolation: 'bwrap' (bubblewrap: no network, sees only its workspace "
        "and the submission dir), 'docker' (a container of --agent-image: no network, "
        "non-root, read-only, only the submission and scratch dirs and the agent socket "
        "mounted), 'none' (not isolated), or 'auto' (bwrap if it can start).",
    )
    agent_image: Annotated[str | None, Flag("--agent-image", metavar="IMAGE")] = Field(
        default=None,
        description="With --sandbox docker: the agent's image, holding its code (default "
        "ale-robotics/agent:latest from 'make images'; relative paths in --agent start at "
        "its working directory).",
    )
    workspace: Annotated[Path | None, Flag("--workspace")] = Field(
        default=None,
        description="The agent's code and data, visible read-only (default: current "
        "directory). The agent works in runs/<run_id>/scratch.",
    )

    @field_validator("sandbox")
    @classmethod
    def _sandbox(cls, value: str) -> str:
        return check_sandbox_name(value)


class ExecutorOptions(_Group):
    """What the embedded evaluator runs, and where its rollouts run."""

    episodes: Annotated[int | None, Flag("--episodes")] = Field(
        default=None,
        ge=1,
        description="Smoke run: evaluate only the task's first N episodes (embedded "
        "evaluator). The result and the score say so; it is not an official result.",
    )
    workers: Annotated[int | None, Flag("--workers")] = Field(
        default=None, description="Rollout worker processes."
    )
    executor: Annotated[str, Flag("--executor", metavar="local|ray", choices=_executors)] = Field(
        default="local",
        description="Where the evaluator runs the rollouts: 'local' (worker processes on this "
        "host) or 'ray' (Ray tasks: a local Ray instance, or the cluster at --ray-address). "
        "Results are identical.",
    )
    ray_address: Annotated[str | None, Flag("--ray-address", metavar="ADDR")] = Field(
        default=None,
        description="With --executor ray: the Ray cluster, e.g. HEAD_IP:6379 or 'auto' (this "
        "host must be one of its nodes, see 'ray start'; default: start a local Ray "
        "instance).",
    )

    @field_validator("workers")
    @classmethod
    def _workers(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("use at least 1 rollout worker")
        return value

    @field_validator("executor")
    @classmethod
    def _executor(cls, value: str) -> str:
        return _choice(value, EXECUTORS)


class LimitOptions(_Group):
    """The agent's budget and caps (its cgroup or container, and the harness's watch)."""

    budget_s: Annotated[float | None, Flag("--budget")] = Field(
        default=None, description="Override the agent's wall-clock budget (seconds, > 0)."
    )
    disk_quota_bytes: Annotated[int, Flag("--disk-quota-mib", scale=MIB)] = Field(
        default=4096 * MIB,
        ge=MIB,
        description="Most the agent may write into its scratch and submission directories "
        "(MiB); over it the agent is stopped.",
    )
    log_cap_bytes: Annotated[int, Flag("--log-cap-mib", scale=MIB)] = Field(
        default=64 * MIB, ge=MIB, description="Most of the agent's output kept in agent.log (MiB)."
    )
    cpus: Annotated[float | None, Flag("--cpus")] = Field(
        default=None,
        ge=0.01,
        description="CPUs the agent may use (its cgroup's quota; default: the task's budget, "
        "else all).",
    )
    memory_bytes: Annotated[int | None, Flag("--memory-mib", scale=MIB)] = Field(
        default=None,
        ge=MIB,
        description="Memory the agent may use (MiB; past it the OOM killer stops it; "
        "default: the task's budget, else all).",
    )
    pids_max: Annotated[int | None, Flag("--pids-max")] = Field(
        default=4096, ge=1, description="Most processes and threads the agent may have at once."
    )

    @field_validator("budget_s")
    @classmethod
    def _budget(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError("the agent's wall-clock budget must be a positive number of seconds")
        return value

    @field_validator("disk_quota_bytes", "log_cap_bytes", "memory_bytes")
    @classmethod
    def _mib(cls, value: int | None) -> int | None:
        return _whole_mib(value)


class ModelOptions(_Group):
    """The run's model gateway (:mod:`ale_robotics.harness.agent.model_gateway`): the agent's
    model, reached through the harness, metered and recorded (docs/model-gateway.md)."""

    model_upstream: Annotated[str | None, Flag("--model-upstream", metavar="URL")] = Field(
        default=None,
        description="An OpenAI- or Anthropic-compatible API the agent may call through the "
        "run's model gateway (its key from the harness's ALE_MODEL_API_KEY, never shown to "
        "the agent); default: no model.",
    )
    models: Annotated[tuple[str, ...], Flag("--model", metavar="NAME", repeat=True)] = Field(
        default=(),
        description="A model the agent may ask for (repeat the option for more; the first is "
        "ALE_MODEL); needs --model-upstream.",
    )
    model_budget_tokens: Annotated[int | None, Flag("--model-budget-tokens")] = Field(
        default=None,
        ge=1,
        description="Most input + output tokens the agent's model calls may use in the run "
        "(default: the task's model token budget, else none).",
    )
    model_allow_tools: Annotated[
        tuple[str, ...], Flag("--model-allow-tool", metavar="NAME", repeat=True)
    ] = Field(
        default=(),
        description="A provider-side tool the agent's model may use outside the sandbox "
        "(web_search, web_fetch, mcp, code_execution, ...; repeat for more; default: none, "
        "docs/model-gateway.md); needs --model-upstream.",
    )

    @field_validator("models", "model_allow_tools", mode="before")
    @classmethod
    def _models(cls, value: object) -> object:
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        return value


class EndpointOptions(TlsOptions):
    """A separate evaluator to use instead of an embedded one (default: embedded); its TLS."""

    evaluator: Annotated[str | None, Flag("--evaluator")] = Field(
        default=None,
        description="Agent-channel address of a running evaluator, e.g. "
        "unix://STATE_DIR/agent/agent.sock ('evaluator serve' prints it; default: an "
        "embedded one). Its harness socket and harness.token are found next to it.",
    )
    evaluator_harness: Annotated[str | None, Flag("--evaluator-harness")] = Field(
        default=None,
        description="Harness-channel address of that evaluator (default: found next to it).",
    )
    agent_token_file: Annotated[Path | None, Flag("--agent-token-file")] = Field(
        default=None, description="Its agent.token."
    )
    harness_token_file: Annotated[Path | None, Flag("--harness-token-file")] = Field(
        default=None, description="Its harness.token (default: found next to it)."
    )
    submission_volume: Annotated[Path | None, Flag("--submission-dir")] = Field(
        default=None, description="Submission volume shared with that evaluator."
    )
    state_dir: Annotated[Path | None, Flag("--state-dir")] = Field(
        default=None, description="State dir of the embedded evaluator."
    )
    evaluator_image: Annotated[str | None, Flag("--evaluator-image", metavar="IMAGE")] = Field(
        default=None,
        description="Run the evaluator in a container of this image for the run (e.g. "
        "ale-robotics/evaluator from 'make images'), sharing only the submission volume "
        "and the agent socket with the agent; the result is read through 'docker exec'.",
    )


class OutputOptions(_Group):
    """Where this run goes, what it is called, how the command exits: one run's own."""

    run_dir: Annotated[Path | None, Flag("--run-dir")] = Field(
        default=None, description="Run directory, new or empty (default runs/<run_id>)."
    )
    label: Annotated[str | None, Flag("--label", metavar="TEXT")] = Field(
        default=None,
        description="Name of the agent for 'runs list' and the leaderboard, which rank the "
        "best official run per task and label (letters, digits, . _ + -; default: the agent "
        "script's stem, e.g. td3_train for 'python td3_train.py').",
    )
    repetition: Annotated[int | None, Flag("--repetition", metavar="N")] = Field(
        None, ge=0, description="The run's repetition (eval sets), to the agent as ALE_REPETITION."
    )
    agent_seed: Annotated[int | None, Flag("--agent-seed", metavar="N")] = Field(
        None, ge=0, lt=2**31, description="A training seed, to the agent as ALE_SEED."
    )
    strict: Annotated[bool, Flag("--strict")] = Field(
        default=False,
        description="Exit 1 when the agent ended in error (a non-zero exit, or stopped at a "
        "limit) without submitting; it is scored all the same (for scripts and CI).",
    )

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > LABEL_MAX_LEN or not LABEL_OK.fullmatch(value)):
            raise ValueError(LABEL_RULE)
        return value


GROUPS: tuple[tuple[str, type[_Group]], ...] = (
    ("Sandbox", SandboxOptions),
    ("Agent software", AgentOptions),
    ("Evaluation", ExecutorOptions),
    ("Limits", LimitOptions),
    ("Model", ModelOptions),
    ("Evaluator endpoint", EndpointOptions),
    ("Evaluator retries", RetryOptions),
    ("Videos", VideoOptions),
    ("Output", OutputOptions),
)
"""The groups in the order ``run --help`` shows them and an eval set writes them."""
