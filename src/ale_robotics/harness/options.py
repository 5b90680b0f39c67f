"""What one ``ale-robotics run`` is asked to do: :class:`RunOptions`, run ids, default dirs.

Kept apart from :mod:`.run` so that the pre-run checks (:mod:`.preflight`) and the
run itself read the same options without importing each other.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.paths import state_home

__all__ = [
    "LABEL_MAX_LEN",
    "RunOptions",
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
        raise InvalidArgumentError(
            f"--label {shown!r}: a label is 1 to {LABEL_MAX_LEN} letters, digits, '.', '_', "
            "'+' or '-', starting with a letter or a digit (e.g. td3-baseline)"
        )
    return label


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


@dataclass
class RunOptions:
    task_id: str
    agent_cmd: str
    run_dir: Path | None = None
    evaluator: str | None = None
    evaluator_harness: str | None = None
    harness_token_file: Path | None = None
    agent_token_file: Path | None = None
    submission_volume: Path | None = None
    state_dir: Path | None = None
    budget_s: float | None = None
    workers: int | None = None
    job_timeout_s: float = 900.0
    run_id: str | None = None
    sandbox: Literal["auto", "bwrap", "docker", "none"] = "auto"
    """'auto': bubblewrap where it can start, else 'none' with a warning; 'docker': the
    agent in a container of ``agent_image`` (:mod:`.docker_sandbox`)."""
    agent_image: str | None = None
    """With sandbox 'docker': the agent's image (None: ``ale-robotics/agent:latest``)."""
    evaluator_image: str | None = None
    """Run the evaluator in a container of this image for the run (reached through
    ``docker exec``, :mod:`.evaluator_container`) instead of embedding it."""
    workspace: Path | None = None
    """The agent's code and data, visible read-only (default: the current directory)."""
    runs_root: Path | None = None
    """Where ``<run_id>/`` is created when ``run_dir`` is not given (default: ./runs)."""
    disk_quota_bytes: int = 4 * 1024**3
    """Most the agent may write into its scratch and submission directories together
    (and the most any single file it writes may hold)."""
    log_cap_bytes: int = 64 * 1024**2
    """Most of the agent's output kept in ``agent.log``; the rest is read and dropped."""
    episodes: int | None = None
    """A smoke run: the embedded evaluator runs only the task's first N episodes, and the
    result, the report and the score line say so. An official run leaves it None."""
    cpus: float | None = None
    """CPUs the agent may use (its cgroup's CFS quota); None: the task's budget, else all."""
    memory_bytes: int | None = None
    """Memory the agent may use (its cgroup's limit, past it the OOM killer); None: the
    task's budget, else all."""
    pids_max: int | None = 4096
    """Most processes and threads the agent may have at once (its cgroup's pids.max)."""
    executor: str = "local"
    """Where the embedded evaluator runs the shards: 'local' worker processes or 'ray'."""
    ray_address: str | None = None
    """With executor 'ray': the cluster to connect to (None: a local Ray instance)."""
    label: str | None = None
    """What groups this run with others of the same agent (``runs list``, the leaderboard);
    None: :func:`default_label` of the agent command."""
