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
:class:`RetryOptions`         how long an evaluator gone is waited out (:mod:`.retry_options`)
:class:`VideoOptions`         the evaluation videos (``--videos K``, ``--no-videos``), in
                              :mod:`.video_options`
:class:`OutputOptions`        where this run goes and what it is called (run dir, label,
                              ``--strict``)
============================  ===========================================================

Built from it: :class:`RunOptions` (:func:`.run.run_task`'s), :class:`RunSettings` (what
an eval set's SPEC sets for every run) and the ``run`` command's options (:mod:`.option_flags`).
Validation is here only: each field's rule in a validator, the rules between fields in
:meth:`RunSettings.check`; what needs the task or the disk, in :mod:`.preflight`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import secrets
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.agent_options import AgentOptions
from ale_robotics.harness.option_decl import Flag, OptionGroup
from ale_robotics.harness.retry_options import RetryOptions
from ale_robotics.harness.tls_options import TlsOptions
from ale_robotics.harness.video_options import VideoOptions
from ale_robotics.paths import state_home
from ale_robotics.sandboxes.registry import (
    AUTO,
    check_sandbox_name,
    sandbox_choices,
    sandboxes_taking,
    takes_option,
)

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
    "new_run_id",
]

LABEL_MAX_LEN = 64
"""Most characters a run label may have: it is a table cell and, for eval sets, a directory."""

_LABEL_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_LABEL_BAD_CHARS = re.compile(r"[^A-Za-z0-9._+-]+")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_INTERPRETER = re.compile(r"(python|pypy)[0-9.]*|bash|sh|zsh|dash|node|ruby|perl|Rscript")
_LAUNCHERS = frozenset({"env", "exec", "nice", "nohup", "time", "uv", "run", "poetry", "pipenv"})


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"run-{stamp}-{secrets.token_hex(3)}"


def check_label(label: str) -> str:
    """``label`` if it can name a run, else :class:`InvalidArgumentError` saying what can.

    Labels group runs of one agent on the leaderboard and in ``runs list``, and eval sets
    make a directory of each, so they are short identifiers: letters, digits, ``.``,
    ``_``, ``+`` and ``-``, starting with a letter or a digit.
    """
    if len(label) > LABEL_MAX_LEN or not _LABEL_OK.fullmatch(label):
        shown = label if len(label) <= LABEL_MAX_LEN else label[:LABEL_MAX_LEN] + "..."
        raise InvalidArgumentError(f"--label {shown!r}: {_LABEL_RULE}")
    return label


_LABEL_RULE = (
    f"a label is 1 to {LABEL_MAX_LEN} letters, digits, '.', '_', '+' or '-', starting with "
    "a letter or a digit (e.g. td3-baseline)"
)


def default_label(agent_cmd: str) -> str:
    """The label of a run started without ``--label``: what the agent command runs.

    The script's file stem (``td3_train`` for ``python examples/agents/td3_train.py --x
    1``), the module's last part for ``python -m pkg.agent``, else the program's name
    (``my-agent`` for ``./bin/my-agent --fast``); interpreters, launchers (``env``,
    ``uv run``), ``VAR=value`` prefixes and options are skipped. Whatever a label may
    not hold becomes ``-``, so the result always passes :func:`check_label`.
    """
    try:
        words = shlex.split(agent_cmd)
    except ValueError:  # an unbalanced quote: the preflight refuses it; label it anyway
        words = agent_cmd.split()
    fallback = ""
    chosen = ""
    i = 0
    while i < len(words):
        word = words[i]
        name = Path(word).name
        if _ENV_ASSIGNMENT.match(word):
            i += 1
            continue
        if word in ("-m", "-c") or (word.startswith("-m") and len(word) > 2):
            module = word[2:] if len(word) > 2 else (words[i + 1] if i + 1 < len(words) else "")
            chosen = module.rsplit(".", 1)[-1] if word != "-c" else ""
            break
        if word.startswith("-"):
            i += 1
            continue
        if _INTERPRETER.fullmatch(name) or name in _LAUNCHERS:
            fallback = fallback or name
            i += 1
            continue
        chosen = Path(name).stem if "." in name[1:] else name
        break
    label = _LABEL_BAD_CHARS.sub("-", chosen or fallback or "agent").strip(".+-_")
    return (label or "agent")[:LABEL_MAX_LEN]


def default_state_dir() -> Path:
    """Where an embedded evaluator keeps its secret and keys: outside any run directory."""
    return state_home() / "evaluator"


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
    """The run's model gateway (:mod:`ale_robotics.harness.model_gateway`): the agent's
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
        if value is not None and (len(value) > LABEL_MAX_LEN or not _LABEL_OK.fullmatch(value)):
            raise ValueError(_LABEL_RULE)
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
        starts (the ``run`` command, an eval set's SPEC, :func:`.run.run_task`).
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
