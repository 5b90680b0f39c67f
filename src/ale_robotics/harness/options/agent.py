"""The run options that hand the agent what its software expects: tools and variables.

Agent software is installed the usual ways, outside the workspace: an npm prefix
(``npm install --prefix /opt/agents @anthropic-ai/claude-code``), a pip ``--target`` or a
venv. ``--agent-tools DIR`` shows such a directory read-only in the sandbox at its own
path, with its ``bin/`` (else the directory itself) first on ``PATH``; ``--agent-env
NAME=VALUE`` sets a variable such software reads (``DISABLE_TELEMETRY=1``). Both are
recorded in ``result.json`` (``agent_tools``, ``agent_env``) and the trajectory's
``run_started`` event, and an eval set's SPEC sets them for every run (``agent_tools``,
``agent_env``).

Neither can reach what the harness keeps from the agent: a tools directory that would
show the harness's state, a runs root or the whole file system is refused (and recorded
run directories inside one are covered anyway, as in the workspace), and so is a
variable the harness sets itself (``ALE_*``, the model gateway's, the sandbox's own
``PATH``, ``HOME``, ``TMPDIR``, the dynamic loader's) or whose name looks like a secret
(``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...): the agent's only key is the run's
gateway key, which the harness gives it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Final

from pydantic import Field, field_validator

from ale_robotics.harness.agent.activity import DEFAULT_IDLE_S
from ale_robotics.harness.options.decl import Flag, OptionGroup
from ale_robotics.paths import state_home

__all__ = ["AgentOptions", "agent_env_pairs"]

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HARNESS_NAMES: Final = frozenset(
    {
        "PATH",
        "HOME",
        "TMPDIR",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSAFEPATH",
        "PYTHONUNBUFFERED",
        "VIRTUAL_ENV",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    }
)
"""Variables the harness or the sandbox sets for the agent itself."""
_HARNESS_PREFIXES: Final = ("ALE_", "LD_", "BASH_FUNC_")
_SECRET_PARTS: Final = frozenset(
    {
        "KEY",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "COOKIE",
        "PRIVATE",
    }
)
"""Words of a variable's name (split at ``_``) that make it look like a secret's."""


def _check_env(item: str) -> str:
    name, eq, value = item.partition("=")
    if not eq or not _NAME.fullmatch(name):
        raise ValueError(f"--agent-env {item!r}: NAME=VALUE, NAME of letters, digits and _")
    if "\0" in value:
        raise ValueError(f"--agent-env {name}: the value holds a NUL byte")
    upper = name.upper()
    if upper in _HARNESS_NAMES or upper.startswith(_HARNESS_PREFIXES):
        raise ValueError(
            f"--agent-env {name}: the harness sets {name} itself (ALE_*, the model gateway's "
            "base URLs, PATH, HOME, TMPDIR, the Python and loader variables); use "
            "--agent-tools DIR to put software on PATH"
        )
    if _SECRET_PARTS & set(upper.split("_")) or upper.endswith(("APIKEY", "TOKEN")):
        raise ValueError(
            f"--agent-env {name}: a name that looks like a secret is refused: the agent's "
            "only key is the run's model gateway key, which the harness gives it "
            "(OPENAI_API_KEY, ANTHROPIC_API_KEY, CODEX_API_KEY)"
        )
    return f"{name}={value}"


class AgentOptions(OptionGroup):
    """What the agent's software is given besides its workspace."""

    agent_tools: Annotated[tuple[Path, ...], Flag("--agent-tools", metavar="DIR", repeat=True)] = (
        Field(
            default=(),
            description="A directory of agent software (an npm or pip prefix, a venv) shown "
            "read-only in the sandbox at its own path, its bin/ (else itself) first on PATH; "
            "repeat for more.",
        )
    )
    agent_env: Annotated[
        tuple[str, ...], Flag("--agent-env", metavar="NAME=VALUE", repeat=True)
    ] = Field(
        default=(),
        description="A variable for the agent's software (repeat for more; recorded in "
        "result.json); not ALE_*, the harness's own (PATH, HOME...) or a secret's name.",
    )

    agent_idle_s: Annotated[float, Flag("--agent-idle-s", metavar="S")] = Field(
        default=DEFAULT_IDLE_S,
        ge=0,
        description="Report the agent as idle (console, trajectory, result.json) after S "
        "seconds without a model call or an evaluator call; never stopped for it (default "
        "600; 0: never).",
    )

    @field_validator("agent_env", mode="before")
    @classmethod
    def _env(cls, value: object) -> object:
        items = (value,) if isinstance(value, str) else value
        if items is None:
            return ()
        if not isinstance(items, list | tuple):
            return value
        checked = [_check_env(str(item)) for item in items]
        names = [item.partition("=")[0] for item in checked]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"--agent-env {twice[0]} is given twice")
        return tuple(checked)

    @field_validator("agent_tools", mode="before")
    @classmethod
    def _tools(cls, value: object) -> object:
        if value is None:
            return ()
        return (value,) if isinstance(value, str | Path) else value

    @field_validator("agent_tools")
    @classmethod
    def _tool_dirs(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        out: list[Path] = []
        for path in value:
            resolved = path.expanduser().resolve()
            if not resolved.is_dir():
                raise ValueError(f"--agent-tools {path}: not a directory")
            state = state_home().resolve()
            if resolved == state or resolved in state.parents:
                raise ValueError(
                    f"--agent-tools {path}: it holds the harness's state ({state}); "
                    "give the tools' own directory (an npm or pip prefix)"
                )
            out.append(resolved)
        return tuple(dict.fromkeys(out))


def agent_env_pairs(opts: AgentOptions) -> dict[str, str]:
    """``--agent-env``'s variables as a mapping."""
    return dict(item.partition("=")[::2] for item in opts.agent_env)
