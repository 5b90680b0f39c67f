"""Checks before a run starts: options that cannot work are refused with what to do.

Everything here runs before the run directory, the evaluator or the agent exist, so
a refused run leaves nothing behind (``InvalidArgumentError``: one line, exit 2).
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ale_robotics.engines import require_engine
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator.state.directory import DB_NAME
from ale_robotics.evaluator.store.sqlite import damage
from ale_robotics.harness.agent.access import AgentAccess
from ale_robotics.harness.options import RunOptions, default_state_dir
from ale_robotics.harness.remote.checks import check_remote
from ale_robotics.harness.writable import check_writable, run_writes
from ale_robotics.sandboxes import AgentCommand, Sandbox, resolve_sandbox
from ale_robotics.sandboxes.process import tool_bins, workspace_argv
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "Operand",
    "check_agent_command",
    "check_options",
    "check_run",
    "make_run_dir",
    "script_operand",
    "workspace_argv",
]


def check_run(opts: RunOptions, task: TaskSpec, agent_access: AgentAccess | None = None) -> Sandbox:
    """Every check of a run before anything of it is made; returns its sandbox.

    The options (:func:`check_options`), the sandbox (``auto`` resolved to what this
    host can start), the model gateway, the agent command (:func:`check_agent_command`)
    and every directory the run writes (:mod:`.writable`). Cheap and importing nothing
    heavy (no simulator, gRPC or torch), so that ``ale-robotics run`` makes them before
    it loads the rest of the harness: a usage error costs what an unknown task costs.
    """
    check_options(opts, task)
    sandbox = resolve_sandbox(opts.sandbox, agent_image=opts.agent_image)
    _check_model_gateway(opts, sandbox, agent_access)
    check_agent_command(opts, (opts.workspace or Path.cwd()).resolve(), sandbox)
    check_writable(run_writes(opts))
    return sandbox


def _check_model_gateway(
    opts: RunOptions, sandbox: Sandbox, agent_access: AgentAccess | None
) -> None:
    """Refuse a model gateway (``--model-upstream``) that the agent could not reach, or
    that a caller who drives the agent itself (Inspect) has no use for."""
    if opts.model_upstream is None:
        return
    if agent_access is not None:
        raise InvalidArgumentError(
            "a run whose agent is driven by its caller (Inspect) has no model gateway: "
            "its model is the caller's; leave --model-upstream out"
        )
    if not sandbox.serves_model_gateway:
        raise InvalidArgumentError(
            f"the model gateway cannot reach an agent in --sandbox {sandbox.name}: "
            "use bwrap, docker or none"
        )


def check_options(opts: RunOptions, task: TaskSpec) -> None:
    """Refuse options that cannot work, before any directory or process is created: the
    rules between options (:meth:`.options.RunSettings.check`), then what needs the task
    or the file system."""
    opts.check()
    check_remote(opts)
    # The embedded evaluator runs the task's kind here: its engine must be built
    # (EngineNotInstalled names the command that builds it), and only the local executor
    # starts workers in an engine's interpreter.
    embedded = opts.evaluator is None and opts.evaluator_image is None
    if embedded and require_engine(task) is not None and opts.executor != "local":
        raise InvalidArgumentError(
            f"task {task.id} runs in the engine environment of its rollout kind "
            f"({task.eval.rollout}), where the {opts.executor} executor cannot start "
            "workers: leave --executor out (local)"
        )
    if opts.episodes is not None:
        total = task.eval.evaluated_episodes
        if not 1 <= opts.episodes <= total:
            raise InvalidArgumentError(
                f"--episodes {opts.episodes}: {task.id} evaluates {total} episode(s); a smoke "
                f"run takes 1 to {total} of them (leave --episodes out for the official run)"
            )
    if opts.evaluator_image is not None:
        # The docker extra's other half; imported for such a run only.
        from ale_robotics.sandboxes.docker.evaluator import require_evaluator_image

        require_evaluator_image(opts.evaluator_image)
    if opts.evaluator is None:
        state_dir = opts.state_dir or default_state_dir()
        if state_dir.exists() and not state_dir.is_dir():
            raise InvalidArgumentError(
                f"--state-dir {state_dir} is a file; the evaluator's state dir must be a "
                "directory (it holds its secret, keys and job store): give a directory path"
            )
        store = state_dir / DB_NAME
        problem = damage(store)
        if problem is not None:
            raise InvalidArgumentError(
                f"--state-dir {state_dir}: its job store {store.name} is damaged ({problem}): "
                "restore it from a backup, or move it aside to start with an empty store "
                "(the jobs it held are then gone)"
            )
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


def check_agent_command(opts: RunOptions, workspace: Path, sandbox: Sandbox | None = None) -> None:
    """Refuse an agent command that cannot start, with what to do instead.

    A command that does not exist is the user's typo, not an infrastructure failure: the
    program (on PATH, or a file; relative paths start at the workspace), and the script a
    known interpreter is asked to run (:func:`script_operand`), which would otherwise fail
    in the agent's scratch directory and score 0. A missing one is refused naming the
    path tried and the closest existing file. Then the run's sandbox (default: the one
    ``opts`` asks for, not probed) checks what it would not show (bubblewrap: a command
    or file the host has outside the workspace, the system and this Python), or looks
    the command up in the agent's image (docker, whose command runs no host file).
    """
    try:
        argv = shlex.split(opts.agent_cmd)
    except ValueError as exc:
        raise InvalidArgumentError(f"--agent {opts.agent_cmd!r} cannot be parsed: {exc}") from None
    if not argv:
        raise InvalidArgumentError("--agent is empty: give the command that starts the agent")
    if sandbox is None:
        sandbox = resolve_sandbox(opts.sandbox, check=False, agent_image=opts.agent_image)
    if not sandbox.host_files:
        script = _script_of(argv, script_operand(argv))
        sandbox.check_command(AgentCommand(opts.agent_cmd, tuple(argv), workspace, None, script))
        return
    argv = workspace_argv(argv, workspace)
    found = _resolve_program(argv[0], opts.agent_cmd, workspace, opts.agent_tools)
    operand = script_operand(argv)
    if operand is not None and operand.kind == "script":
        _check_script(operand, argv[0], opts.agent_cmd, workspace)
    elif operand is not None and operand.kind == "module" and found == sys.executable:
        _warn_if_no_module(operand.value, opts.agent_cmd, workspace)
    # What must start: the command, and the script an interpreter is asked to run.
    script = _script_of(argv, operand)
    sandbox.check_command(
        AgentCommand(opts.agent_cmd, tuple(argv), workspace, found, script, opts.agent_tools)
    )


_INTERPRETER = re.compile(r"(python[0-9.]*|bash|sh|dash|zsh|node|ruby|perl)")
"""Programs whose first operand is taken for the script they run (for the sandbox's
visibility checks); those :func:`script_operand` knows are read option by option."""


def _script_of(argv: list[str], operand: Operand | None) -> str | None:
    """The file the command's interpreter is asked to run, if any."""
    if operand is not None:
        return operand.value if operand.kind == "script" else None
    if not _INTERPRETER.fullmatch(os.path.basename(argv[0])):
        return None
    return next((a for a in argv[1:] if not a.startswith("-")), None)


# --- What the agent command runs: its program, and the script an interpreter runs ----

_PYTHON = re.compile(r"(python|pypy)[0-9.]*")
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
_NODES = frozenset({"node", "nodejs"})
_PYTHON_VALUE_FLAGS = frozenset("WX")
"""Python's one-letter options that take a value (attached, or the next argument)."""
_PYTHON_VALUE_OPTIONS = frozenset({"--check-hash-based-pycs"})
_SHELL_VALUE_OPTIONS = frozenset({"--rcfile", "--init-file"})
_NODE_CODE_OPTIONS = frozenset({"-e", "--eval", "-p", "--print", "-pe", "-i", "--interactive"})
_NODE_VALUE_OPTIONS = frozenset(
    {
        "-r",
        "--require",
        "--import",
        "--loader",
        "--experimental-loader",
        "-C",
        "--conditions",
        "--input-type",
        "--env-file",
        "--title",
        "--redirect-warnings",
        "--inspect-port",
        "--cpu-prof-dir",
        "--heap-prof-dir",
        "--diagnostic-dir",
        "--report-dir",
        "--openssl-config",
        "--icu-data-dir",
    }
)
_NODE_EXTENSIONS = ("", ".js", ".mjs", ".cjs", ".json", ".node")
"""What ``node NAME`` tries: NAME itself, then NAME with these extensions."""
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "runs", "venv", "site-packages"})
_NAME_CUTOFF = 0.75
"""How alike a file name alone must be to be suggested (a whole path: 0.6, difflib's)."""
_MAX_CANDIDATES = 20_000
"""Most workspace files compared with a missing name (the search stops there)."""


@dataclass(frozen=True)
class Operand:
    """What a known interpreter (Python, a POSIX shell, Node) is asked to run.

    ``script``: a file, ``value`` the argument naming it (made absolute by
    :func:`workspace_argv` when the workspace has it); ``module``: ``python -m
    value``; ``code``: a string (``-c``, ``-e``); ``stdin``: nothing to run but its
    input (``-``, ``-s``, or no operand at all).
    """

    kind: Literal["script", "module", "code", "stdin"]
    value: str = ""


def script_operand(argv: list[str]) -> Operand | None:
    """What the interpreter ``argv[0]`` runs, its options read as it reads them.

    None when ``argv[0]`` is not an interpreter known here (its arguments mean what
    the program makes of them).
    """
    name = os.path.basename(argv[0])
    if _PYTHON.fullmatch(name):
        return _python_operand(argv)
    if name in _SHELLS:
        return _shell_operand(argv)
    if name in _NODES:
        return _node_operand(argv)
    return None


def _python_operand(argv: list[str]) -> Operand:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-":
            return Operand("stdin")
        if arg == "--":
            return Operand("script", argv[i + 1]) if i + 1 < len(argv) else Operand("stdin")
        if arg.startswith("--"):  # --help, --version, --check-hash-based-pycs MODE
            i += 2 if arg in _PYTHON_VALUE_OPTIONS else 1
            continue
        if not arg.startswith("-"):
            return Operand("script", arg)
        step = 1
        for j, flag in enumerate(arg[1:], start=2):  # -u, -uB, -Wignore, -X dev, -mpkg
            rest = arg[j:]
            if flag in "cm":
                value = rest or (argv[i + 1] if i + 1 < len(argv) else "")
                return Operand("code" if flag == "c" else "module", value)
            if flag in _PYTHON_VALUE_FLAGS:
                step = 1 if rest else 2
                break
        i += step
    return Operand("stdin")


def _shell_operand(argv: list[str]) -> Operand:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-", "--"):
            return Operand("script", argv[i + 1]) if i + 1 < len(argv) else Operand("stdin")
        if arg.startswith("--"):  # --norc, --login, --rcfile FILE
            i += 2 if arg in _SHELL_VALUE_OPTIONS else 1
            continue
        if len(arg) > 1 and arg[0] in "-+":
            letters = arg[1:]
            if arg[0] == "-" and "c" in letters:
                return Operand("code", argv[i + 1] if i + 1 < len(argv) else "")
            if arg[0] == "-" and "s" in letters:
                return Operand("stdin")
            i += 1 + sum(flag in "oO" for flag in letters)  # -o pipefail, +O extglob
            continue
        return Operand("script", arg)
    return Operand("stdin")


def _node_operand(argv: list[str]) -> Operand:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-":
            return Operand("stdin")
        if arg == "--":
            return Operand("script", argv[i + 1]) if i + 1 < len(argv) else Operand("stdin")
        if arg in _NODE_CODE_OPTIONS or arg.startswith(("--eval=", "--print=")):
            return Operand("code", argv[i + 1] if i + 1 < len(argv) else "")
        if arg.startswith("-"):
            i += 2 if arg in _NODE_VALUE_OPTIONS else 1
            continue
        return Operand("script", arg)
    return Operand("stdin")


def _resolve_program(
    exe: str, agent_cmd: str, workspace: Path, tools: tuple[Path, ...] = ()
) -> str:
    """The program the command starts, as a path; else why not, and what is close."""
    if "/" not in exe:
        # The agent's PATH: the --agent-tools bins, then the harness's (agent_env).
        path = os.pathsep.join([*tool_bins(tools), os.environ.get("PATH", os.defpath)])
        found = shutil.which(exe, path=path)
        if found is not None:
            return found
        hint = _closest_program(exe)
        raise InvalidArgumentError(
            f"command not found: {exe!r} (from --agent {agent_cmd!r}) is not on PATH"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + "; check the spelling, or give the full path"
        )
    if os.path.isabs(exe) and os.path.isfile(exe):
        if os.access(exe, os.X_OK):
            return exe
        raise InvalidArgumentError(
            f"{exe} (from --agent {agent_cmd!r}) is not executable: make it so (chmod +x "
            f"{exe}), or start it with its interpreter (e.g. --agent 'bash {exe}')"
        )
    tried = Path(exe) if os.path.isabs(exe) else workspace / exe
    rule = "" if os.path.isabs(exe) else _RELATIVE_RULE
    raise InvalidArgumentError(
        f"command not found: {exe!r} (from --agent {agent_cmd!r}): there is no file {tried}"
        f"{rule}{_did_you_mean(tried, workspace)}"
    )


_RELATIVE_RULE = (
    "; relative paths in --agent start at the workspace (--workspace, default: the current "
    "directory), not at the scratch directory the agent runs in"
)


def _check_script(operand: Operand, exe: str, agent_cmd: str, workspace: Path) -> None:
    """Refuse a script that is not there (a typo would else be a run scored 0)."""
    value = operand.value
    tried = Path(value) if os.path.isabs(value) else workspace / value
    names = _NODE_EXTENSIONS if os.path.basename(exe) in _NODES else ("",)
    if any(os.path.exists(f"{tried}{ext}") for ext in names):
        return  # a directory is fine too: python runs its __main__.py, node its index.js
    rule = "" if os.path.isabs(value) else _RELATIVE_RULE
    raise InvalidArgumentError(
        f"--agent {agent_cmd!r}: the script {value} does not exist (tried {tried}{rule})"
        f"{_did_you_mean(tried, workspace)}"
    )


def _warn_if_no_module(module: str, agent_cmd: str, workspace: Path) -> None:
    """``python -m MODULE``: a warning (never a refusal) when the agent's Python cannot
    find the module. Only its top-level package is looked up (nothing is imported)."""
    top = module.split(".", 1)[0]
    if not top:
        return
    try:
        if importlib.util.find_spec(top) is not None:
            return
    except (ImportError, ValueError):
        pass
    in_workspace = (workspace / top).is_dir() or (workspace / f"{top}.py").is_file()
    why = (
        f"{top} is in the workspace, but the agent starts in its run's scratch directory, "
        "so Python does not look there: give the script's path instead (python "
        f"{top}/...py), or install the package"
        if in_workspace
        else "check the spelling, or install it"
    )
    print(
        f"warning: --agent {agent_cmd!r}: this Python finds no module {top!r} ({why})",
        file=sys.stderr,
        flush=True,
    )


def _did_you_mean(tried: Path, workspace: Path) -> str:
    """``"; did you mean X?"`` with the existing file closest to ``tried``, or ``""``."""
    if tried.parent.is_dir() and tried.parent != workspace and not _under(tried, workspace):
        names = [e for e in _listdir(tried.parent) if (tried.parent / e).is_file()]
        close = difflib.get_close_matches(tried.name, names, n=1, cutoff=0.6)
        return f"; did you mean {tried.parent / close[0]}?" if close else ""
    if not _under(tried, workspace):
        return ""
    wanted = tried.relative_to(workspace).as_posix()
    best = _closest_file(wanted, _workspace_files(workspace, tried.suffix))
    return f"; did you mean {best}?" if best else ""


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _workspace_files(workspace: Path, suffix: str) -> list[str]:
    """Workspace files (relative, POSIX), with ``suffix`` if any has it; hidden
    directories, caches, virtual environments and run directories are skipped."""
    found: list[str] = []
    for top, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        rel = Path(top).relative_to(workspace)
        found += [(rel / f).as_posix() for f in sorted(files) if not f.startswith(".")]
        if len(found) >= _MAX_CANDIDATES:
            break
    same = [f for f in found if suffix and f.endswith(suffix)]
    return same or found


def _closest_file(wanted: str, candidates: list[str]) -> str | None:
    """The candidate most like ``wanted``: by its whole path, or by its name alone
    (``trian.py`` finds ``examples/train.py``; names are short, so they must be closer),
    whichever is closer; ties go to the closer path."""
    name = wanted.rsplit("/", 1)[-1]
    best: tuple[float, float, str] | None = None
    for cand in candidates:
        path_m = difflib.SequenceMatcher(None, wanted, cand)
        name_m = difflib.SequenceMatcher(None, name, cand.rsplit("/", 1)[-1])
        if max(path_m.real_quick_ratio(), name_m.real_quick_ratio()) < 0.6:
            continue
        by_path = path_m.ratio() if path_m.quick_ratio() >= 0.6 else 0.0
        by_name = name_m.ratio() if name_m.quick_ratio() >= _NAME_CUTOFF else 0.0
        score = max(by_path, by_name if by_name >= _NAME_CUTOFF else 0.0)
        key = (score, by_path, cand)
        if score >= 0.6 and (best is None or key[:2] > best[:2]):
            best = key
    return best[2] if best is not None else None


def _closest_program(exe: str) -> str | None:
    """The program on PATH (or the interpreters the agent is usually started with) whose
    name is closest to ``exe``, to suggest for a typo (``pyhton``)."""
    names = {"python", "python3", "node", "bash", "sh"}
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d:
            names.update(_listdir(Path(d)))
    close = difflib.get_close_matches(exe, sorted(names), n=1, cutoff=0.75)
    return close[0] if close else None
