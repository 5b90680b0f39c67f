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
from ale_robotics.harness.docker_cli import DEFAULT_AGENT_IMAGE
from ale_robotics.harness.docker_images import agent_user, require_image, resolve_in_image
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
    _check_docker_options(opts)
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


def _check_docker_options(opts: RunOptions) -> None:
    """The container options: what goes with what, and the evaluator image is there."""
    if opts.agent_image is not None and opts.sandbox != "docker":
        raise InvalidArgumentError(
            "--agent-image goes with --sandbox docker (the agent runs in a container of it)"
        )
    if opts.evaluator_image is None:
        return
    if opts.evaluator is not None:
        raise InvalidArgumentError(
            "--evaluator-image starts an evaluator container for the run; --evaluator uses "
            "one that is already running: give one of them"
        )
    if opts.episodes is not None:
        raise InvalidArgumentError(
            "--episodes makes the embedded evaluator run a smoke run; an evaluator container "
            "(--evaluator-image) always runs the task's full protocol"
        )
    if opts.executor != "local":
        raise InvalidArgumentError(
            "--executor ray is for the embedded evaluator; an evaluator container runs its "
            "rollouts in local worker processes"
        )
    require_image(opts.evaluator_image, "evaluator")


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
    explained (the agent sees only its workspace, the system and this Python). Under
    docker the command is looked up in the agent's image instead.
    """
    try:
        argv = shlex.split(opts.agent_cmd)
    except ValueError as exc:
        raise InvalidArgumentError(f"--agent {opts.agent_cmd!r} cannot be parsed: {exc}") from None
    if not argv:
        raise InvalidArgumentError("--agent is empty: give the command that starts the agent")
    if opts.sandbox == "docker":
        _check_command_in_image(opts, argv)
        return
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


def _check_command_in_image(opts: RunOptions, argv: list[str]) -> None:
    """The agent command as the agent's image has it (a probe container; cached).

    A host file named in --agent is not in the container, which mounts no host file:
    refused when it is the command's script, else a warning.
    """
    image = require_image(opts.agent_image or DEFAULT_AGENT_IMAGE, "agent")
    uid, gid = agent_user()
    resolved = resolve_in_image(image, tuple(argv), f"{uid}:{gid}")
    script = next((a for a in argv[1:] if not a.startswith("-")), None)
    if not _INTERPRETER.fullmatch(os.path.basename(argv[0])):
        script = None
    for arg, in_image in zip(argv, resolved.in_image, strict=False):
        if in_image or not os.path.isabs(arg) or not os.path.exists(arg):
            continue
        where = (
            f"{arg} (in --agent {opts.agent_cmd!r}) exists on this host but not in the agent "
            f"image {image.ref!r}: the container mounts no host files"
        )
        if arg == script:
            raise InvalidArgumentError(
                f"{where}; put the agent's code in its image (FROM ale-robotics/agent, COPY "
                "it into /workspace) and name it relative to the image's working directory "
                f"{resolved.working_dir}"
            )
        print(f"warning: {where}", file=sys.stderr, flush=True)


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
            try:
                if candidate.is_file():
                    arg = str(candidate)
            except OSError:  # not a file name at all (python -c CODE: too long for one)
                pass
        out.append(arg)
    return out
