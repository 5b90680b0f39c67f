"""Run ids and run labels: what a run is called, and what a label may hold."""

from __future__ import annotations

import datetime as dt
import re
import secrets
import shlex
from pathlib import Path

from ale_robotics.errors import InvalidArgumentError

LABEL_MAX_LEN = 64
"""Most characters a run label may have: it is a table cell and, for eval sets, a directory."""

LABEL_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
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
    if len(label) > LABEL_MAX_LEN or not LABEL_OK.fullmatch(label):
        shown = label if len(label) <= LABEL_MAX_LEN else label[:LABEL_MAX_LEN] + "..."
        raise InvalidArgumentError(f"--label {shown!r}: {LABEL_RULE}")
    return label


LABEL_RULE = (
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
