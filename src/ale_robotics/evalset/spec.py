"""The eval-set SPEC: which tasks, which agents, how many repetitions, how to aggregate.

A SPEC is a small YAML file a person writes and keeps next to their agents::

    schema_version: 1
    name: td3-smoke                 # optional: default the file's stem
    tasks: [td3-inverted-pendulum-v2, td3-halfcheetah-vec-v1]
    agents:
      - {label: checkpoint, cmd: "python examples/agents/submit_checkpoint.py"}
      - {label: td3, cmd: "python examples/agents/td3_train.py"}
    repetitions: 5
    episodes: 2                     # optional: smoke runs of each task's first N episodes
    budget_s: 600                   # optional: each run's wall-clock budget
    sandbox: auto                   # auto | bwrap | docker | none (the installed sandboxes)
    agent_image: my-agent:1         # with sandbox docker: the agents' image
    workers: 1                      # any other option of `ale-robotics run`, by its field
    out: eval-sets/td3-smoke        # optional: default RUNS_ROOT/NAME/aggregate
    run_args: [--state-dir, state]  # optional: the same options, as command-line flags
    bootstrap: {reps: 5000, profile_reps: 1000, seed: 0, confidence: 0.95}

Every option of ``ale-robotics run`` but those the set gives each run itself (the
agent command, run directory and label; ``--strict`` is eval-set's own) is a key here,
declared once with the command's (:class:`~ale_robotics.harness.options.RunSettings`:
the same names as ``RunOptions``' fields, the same values, the same checks; sizes in
bytes, whole MiB). ``run_args`` gives them as flags instead (``--workers 1``), checked
the same way; an option given both ways is refused.

It is parsed with the same strict YAML loader as submissions (no tags, no duplicate
keys, bounded size) and then validated by :class:`EvalSetSpec`, which forbids unknown
keys: a mistyped ``repetition:`` is an error, not a silent default. Relative paths
(``out``, ``state_dir``, ``workspace``, and those inside agent commands) are relative
to the current directory, as for ``ale-robotics run``. ``schema_version`` is required,
so that a later version of the format is never read as this one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import RunOptions, RunSettings, check_label, flag_of
from ale_robotics.harness.options.flags import flag_args, from_command_line, parse_flags
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.submission.yaml_strict import Position, YamlPath, load_yaml_positions

__all__ = [
    "RESERVED_SET_DIRS",
    "SPEC_MAX_BYTES",
    "AgentEntry",
    "BootstrapSettings",
    "EvalSetSpec",
    "load_spec",
]

SPEC_MAX_BYTES = 256 * 1024
"""Largest SPEC file read: a SPEC lists tasks and agents, never data."""

RESERVED_SET_DIRS = frozenset({"aggregate"})
"""Names inside a set's directory that are not task directories (the default ``out``)."""

_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")

_PER_RUN = frozenset(RunOptions.model_fields) - frozenset(RunSettings.model_fields)
"""Options the set gives each run itself (agent command, run directory, label...)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentEntry(_Model):
    """One agent of the set: its label (a directory name and the runs' ``--label``) and
    the command that starts it (``--agent``)."""

    label: str = Field(description="The agent's name in tables, plots and run directories.")
    cmd: str = Field(min_length=1, description="Command that starts the agent (--agent).")
    uses_seed: bool = Field(
        default=False,
        description="The agent declares that it seeds its training with ALE_SEED (each "
        "repetition's own): its repetitions then vary training, not only the hidden seeds.",
    )

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        try:
            return check_label(value)
        except InvalidArgumentError as exc:
            raise ValueError(exc.message.removeprefix("--label ")) from None

    @field_validator("cmd")
    @classmethod
    def _cmd(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the agent command is empty")
        return value


class BootstrapSettings(_Model):
    """How the confidence intervals are computed; fixed, so that an aggregate reproduces.

    Every estimate is seeded with ``seed`` on its own (not one stream for the whole
    set), so one cell's interval does not change when a task or agent is added.
    ``reps`` is rliable's number of bootstrap replications for interval estimates:
    5000 puts the Monte Carlo error of a 95% bound well below the third decimal
    printed. Performance profiles evaluate every threshold on every replication, so
    they take fewer (rliable's own default is 2000).
    """

    reps: int = Field(default=5000, ge=100, le=1_000_000)
    profile_reps: int = Field(default=1000, ge=100, le=1_000_000)
    seed: int = Field(default=0, ge=0, lt=2**32)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)


class EvalSetSpec(RunSettings):
    """A grid of runs, tasks x agents x repetitions, and how to aggregate it (schema 1).

    Its run options (every :class:`~ale_robotics.harness.options.RunSettings` field,
    plus ``run_args``) hold for every run of the set.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = Field(description="Version of this format: 1.")
    name: str | None = Field(
        default=None,
        description="The set's name, the directory RUNS_ROOT/NAME (default: the SPEC's stem).",
    )
    tasks: Annotated[list[str], Field(min_length=1)]
    agents: Annotated[list[AgentEntry], Field(min_length=1)]
    repetitions: int = Field(ge=1, le=1000, description="Runs of each agent on each task.")
    out: Path | None = Field(
        default=None, description="Where the aggregate goes (default RUNS_ROOT/NAME/aggregate)."
    )
    run_args: list[str] = Field(
        default_factory=list,
        description="More options for every `ale-robotics run`, as flags (e.g. --workers 1, "
        "--state-dir D): the same as the SPEC's keys.",
    )
    bootstrap: BootstrapSettings = Field(default_factory=BootstrapSettings)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None:
            _check_name(value, "name")
        return value

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, value: list[str]) -> list[str]:
        for task in value:
            _check_name(task, "task id")
            if task in RESERVED_SET_DIRS:
                raise ValueError(f"{task!r} cannot be a task id here (a set's directory uses it)")
        _check_unique(value, "task")
        return value

    @field_validator("agents")
    @classmethod
    def _unique_labels(cls, value: list[AgentEntry]) -> list[AgentEntry]:
        _check_unique([a.label for a in value], "agent label")
        return value

    @field_validator("run_args")
    @classmethod
    def _run_args(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Flags the set gives each run itself are refused, and so is an option given
        both as a key (validated before ``run_args``: ``info.data``) and as a flag."""
        fields = RunSettings.model_fields
        keys = {n for n, f in fields.items() if n in info.data and info.data[n] != f.get_default()}
        for name in parse_flags(value):
            if name in _PER_RUN:
                raise ValueError(
                    f"{flag_of(name).name} is set by the eval set for every run (agents, run "
                    "directories and labels come from the SPEC; eval-set has its own --strict)"
                )
            if name in keys:
                raise ValueError(
                    f"{flag_of(name).name} is set by the eval set's key {name!r} already; "
                    "give it once"
                )
        return value

    @model_validator(mode="after")
    def _run_settings(self) -> EvalSetSpec:
        try:
            self.run_options("t", "a", "a", Path("."))
        except InvalidArgumentError as exc:
            raise ValueError(exc.message) from None
        return self

    def _keys(self) -> set[str]:
        """The run options the SPEC's keys set: those not at their default (a key at its
        default says nothing, as in a SPEC read back from its JSON dump)."""
        fields = RunSettings.model_fields
        return {n for n, f in fields.items() if getattr(self, n) != f.get_default()}

    def run_flags(self) -> list[str]:
        """The options of every run of the set as ``ale-robotics run`` flags: the SPEC's
        keys (its sandbox always, unless ``run_args`` gives it), then ``run_args``."""
        keys = self._keys()
        if "sandbox" not in parse_flags(self.run_args):
            keys.add("sandbox")
        return [*flag_args(self, keys), *self.run_args]

    def run_options(
        self,
        task_id: str,
        label: str,
        cmd: str,
        run_dir: Path,
        *,
        repetition: int | None = None,
        agent_seed: int | None = None,
    ) -> RunOptions:
        """What ``ale-robotics run`` makes of one run's command line (:meth:`run_flags`
        after the run's own), started in this directory, as the set starts it."""
        values = {
            **parse_flags(self.run_flags()),
            "task_id": task_id,
            "agent_cmd": cmd,
            "run_dir": run_dir,
            "label": label,
            "repetition": repetition,
            "agent_seed": agent_seed,
        }
        return from_command_line(values, Path.cwd())

    def settings(self) -> RunSettings:
        """The run options the set gives every run (its keys and ``run_args``)."""
        opts = self.run_options("t", "a", "a", Path("."))
        return RunSettings.model_validate(opts.model_dump(include=set(RunSettings.model_fields)))

    def set_name(self, spec_path: Path) -> str:
        """The set's name: ``name``, else the SPEC file's stem (checked like a name)."""
        if self.name is not None:
            return self.name
        try:
            return _check_name(spec_path.stem, "name")
        except ValueError as exc:
            raise InvalidArgumentError(
                f"{spec_path}: {exc}; the set is named after the file, so rename it or add "
                "'name: ...' to the SPEC"
            ) from None


def _check_name(value: str, what: str) -> str:
    if not _NAME_OK.fullmatch(value):
        raise ValueError(
            f"{what} {value!r}: use 1 to 64 letters, digits, '.', '_', '+' or '-', starting "
            "with a letter or a digit (it names a directory)"
        )
    return value


def _check_unique(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{what} {v!r} is listed twice")
        seen.add(v)


def load_spec(path: Path) -> EvalSetSpec:
    """Read and validate a SPEC file, or raise :class:`InvalidArgumentError` saying what
    to fix: every problem, each as ``FILE:LINE:COLUMN: key.path: what is wrong`` (the
    form editors and terminals jump to), in the order of the file; the CLI exits 2."""
    try:
        data, where = load_yaml_positions(path, str(path), SPEC_MAX_BYTES)
    except SubmissionRejected as exc:
        at = f"{path}:{exc.line}:{exc.column}" if exc.line is not None else str(path)
        raise InvalidArgumentError(f"{at}: {exc.detail} (rule: {exc.rule})") from None
    if not isinstance(data, dict):
        raise InvalidArgumentError(
            f"{path}: a SPEC is a YAML mapping (schema_version, tasks, agents, repetitions, ...)"
        )
    if "schema_version" not in data:
        raise InvalidArgumentError(
            f"{path}:1:1: schema_version is missing; add 'schema_version: 1' at the top"
        )
    try:
        return EvalSetSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidArgumentError(_problems(path, exc, where)) from None


def _problems(
    path: Path, exc: ValidationError, where: dict[YamlPath, tuple[Position, Position]]
) -> str:
    """Every validation error as ``FILE:LINE:COLUMN: key.path: message`` (no pydantic
    URL), sorted by place; more than one under a first line that counts them."""
    found = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        line, column = _place(loc, error["type"], where) if loc else (0, 0)
        key = ".".join(str(p) for p in loc)
        msg = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            msg = "unknown key (a SPEC has no such setting; check its spelling)"
        elif error["type"] == "missing":
            msg = "missing; add it (a SPEC needs schema_version, tasks, agents, repetitions)"
        found.append((line, column, f"{key}: {msg}" if key else msg))
    # A rule over the whole SPEC (loc ()) has no one place in it: the file's name alone.
    lines = [
        f"{path}:{line}:{column}: {text}" if line else f"{path}: {text}"
        for line, column, text in sorted(found)
    ]
    if len(lines) == 1:
        return lines[0]
    return f"{path}: {len(lines)} problems\n" + "\n".join(lines)


def _place(
    loc: tuple[str | int, ...], kind: str, where: dict[YamlPath, tuple[Position, Position]]
) -> Position:
    """Where an error at ``loc`` points in the file: its value, or the key for an unknown
    key; for a key that is not there (a missing one), the mapping that lacks it."""
    for depth in range(len(loc), -1, -1):
        at = where.get(loc[:depth])
        if at is not None:
            key, value = at
            return key if kind == "extra_forbidden" and depth == len(loc) else value
    return (1, 1)
