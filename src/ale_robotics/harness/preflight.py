"""Checks before a run starts: options that cannot work are refused with what to do.

Everything here runs before the run directory, the evaluator or the agent exist, so
a refused run leaves nothing behind (``InvalidArgumentError``: one line, exit 2).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import RunOptions, default_state_dir
from ale_robotics.harness.sandbox import sandbox_visible
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["check_agent_command", "check_options", "make_run_dir", "workspace_argv"]


def check_options(opts: RunOptions, task: TaskSpec) -> None:
    """Refuse options that cannot work, before any directory or process is created."""
    if opts.budget_s is not None and not (math.isfinite(opts.budget_s) and opts.budget_s > 0):
        raise InvalidArgumentError(
            f"--budget {opts.budget_s:g}: the agent's wall-clock budget must be a positive "
            "number of seconds"
        )
    if opts.workers is not None and opts.workers < 1:
        raise InvalidArgumentError(f"--workers {opts.workers}: use at least 1 rollout worker")
    if opts.episodes is not None:
        if opts.evaluator is not None:
            raise InvalidArgumentError(
                "--episodes makes the embedded evaluator run a smoke run; an evaluator "
                "started separately always runs the task's full protocol"
            )
        total = task.eval.evaluated_episodes
        if not 1 <= opts.episodes <= total:
            raise InvalidArgumentError(
                f"--episodes {opts.episodes}: {task.id} evaluates {total} episode(s); a smoke "
                f"run takes 1 to {total} of them (leave --episodes out for the official run)"
            )
    if opts.evaluator is None:
        state_dir = opts.state_dir or default_state_dir()
        if state_dir.exists() and not state_dir.is_dir():
            raise InvalidArgumentError(
                f"--state-dir {state_dir} is a file; the evaluator's state dir must be a "
                "directory (it holds its secret, keys and job store): give a directory path"
            )
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidArgumentError(
                f"--state-dir {state_dir} cannot be created ({exc.strerror}): give a "
                "directory this user can write"
            ) from None
    if opts.run_dir is not None and opts.run_dir.exists():
        if not opts.run_dir.is_dir():
            raise InvalidArgumentError(
                f"--run-dir {opts.run_dir} is a file: give a new or empty directory"
            )
        if any(opts.run_dir.iterdir()):
            raise InvalidArgumentError(
                f"--run-dir {opts.run_dir} is not empty: give a new or empty directory "
                "(a run never writes over another run's files)"
            )


def make_run_dir(path: Path) -> Path:
    """Create the run directory (an existing empty one is used as it is)."""
    run_dir = path.resolve()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot create the run directory {run_dir} ({exc.strerror})"
        ) from None
    if any(run_dir.iterdir()):  # made by someone else since the check
        raise InvalidArgumentError(f"the run directory {run_dir} is not empty")
    return run_dir


def check_agent_command(opts: RunOptions, workspace: Path) -> None:
    """Refuse an agent command that cannot start, with what to do instead.

    A command that does not exist is the user's typo, not an infrastructure failure;
    under bubblewrap, a command or file the host has but the sandbox does not show is
    explained (the agent sees only its workspace, the system and this Python).
    """
    try:
        argv = shlex.split(opts.agent_cmd)
    except ValueError as exc:
        raise InvalidArgumentError(f"--agent {opts.agent_cmd!r} cannot be parsed: {exc}") from None
    if not argv:
        raise InvalidArgumentError("--agent is empty: give the command that starts the agent")
    argv = workspace_argv(argv, workspace)
    exe = argv[0]
    if "/" in exe:
        found = exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None
    else:
        found = shutil.which(exe)
    if found is None:
        where = "not an executable file" if "/" in exe else "not on PATH"
        raise InvalidArgumentError(
            f"command not found: {exe!r} (from --agent {opts.agent_cmd!r}) is {where}; "
            "check the spelling, or give the full path"
        )
    if opts.sandbox != "bwrap":
        return
    visible = sandbox_visible(workspace)
    shows = (
        f"the agent's sandbox, which shows only its workspace {workspace} (read-only), the "
        "system directories and this Python environment"
    )
    # What must start: the command, and the script an interpreter is asked to run.
    script = next((a for a in argv[1:] if not a.startswith("-")), None)
    needed = [found]
    if script is not None and _INTERPRETER.fullmatch(os.path.basename(exe)):
        needed.append(script)
    for arg in needed:
        if os.path.isabs(arg) and os.path.exists(arg) and not visible(Path(arg)):
            raise InvalidArgumentError(
                f"{arg} (in --agent {opts.agent_cmd!r}) exists on this host but not inside "
                f"{shows}: move it into the workspace, or pass --workspace DIR for a directory "
                "that holds it"
            )
    # Other paths may be meant to be missing (an agent probing what it can see): a warning.
    for arg in argv[1:]:
        if arg in needed or not os.path.isabs(arg) or not os.path.exists(arg):
            continue
        if not visible(Path(arg)):
            print(
                f"warning: {arg} (in --agent) is not visible inside {shows}",
                file=sys.stderr,
                flush=True,
            )


_INTERPRETER = re.compile(r"(python[0-9.]*|bash|sh|dash|zsh|node|ruby|perl)")


def workspace_argv(argv: list[str], workspace: Path) -> list[str]:
    """The agent command with relative paths to workspace files made absolute.

    A bare ``python``/``python3`` as the command becomes this interpreter.

    The agent runs in its scratch directory, not in the (read-only) workspace,
    so ``python examples/agents/x.py`` would not find its script otherwise. Only
    arguments that name an existing file of the workspace change.
    """
    out = []
    for i, arg in enumerate(argv):
        if i == 0 and arg in ("python", "python3"):
            # A bare "python" is this interpreter, the one with the SDK installed: on
            # PATH it may be the system's (a venv not activated) or a pyenv shim whose
            # files the sandbox does not show. A path picks another interpreter.
            out.append(sys.executable)
            continue
        if arg and not arg.startswith("-") and not os.path.isabs(arg):
            candidate = workspace / arg
            if candidate.is_file():
                arg = str(candidate)
        out.append(arg)
    return out
