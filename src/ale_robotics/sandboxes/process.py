"""The agent as a process of this host: what the ``bwrap`` and ``none`` sandboxes share.

Both start the agent command from the host's files (the workspace, this Python) with a
curated environment (:func:`agent_env`), in a cgroup of the run's own that caps and
measures it (:mod:`.cgroups`; where cgroups cannot be used, the agent runs uncapped and
the harness says so), frozen through that cgroup or, without one, by ``SIGSTOP`` to its
process group. :class:`ProcessConfinement` is that handle.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ale_robotics.sandboxes.base import AgentLaunch, Confinement
from ale_robotics.sandboxes.cgroup_setup import CgroupsUnavailable, create_run_cgroup
from ale_robotics.sandboxes.cgroups import Limits, RunCgroup, Usage

__all__ = [
    "ProcessConfinement",
    "agent_env",
    "run_cgroup",
    "warn_cgroup",
    "workspace_argv",
    "wrapped",
]


def agent_env(launch: AgentLaunch) -> dict[str, str]:
    """The agent's whole environment: a few of the harness's variables, then the run's."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        ALE_ENDPOINT=launch.endpoint,
        ALE_TOKEN=launch.token,
        ALE_TASK_ID=launch.task_id,
        ALE_RUN_ID=launch.run_id,
        ALE_SUBMISSION_DIR=str(launch.submission),
        ALE_WORKSPACE=str(launch.workspace),
        ALE_SCRATCH_DIR=str(launch.scratch),
        PYTHONUNBUFFERED="1",
    )
    if launch.task_dir is not None:
        env["ALE_TASK_DIR"] = str(launch.task_dir)
    if launch.home is not None:
        env["HOME"] = str(launch.home)
    env.update(launch.extra_env)
    # The --agent-tools first, then this Python's bin/ (ale-robotics, and the venv's
    # programs, whatever the harness's PATH), then the harness's PATH.
    path = env.get("PATH", os.defpath).split(os.pathsep)
    first = [*tool_bins(launch.tools), os.path.dirname(sys.executable)]
    env["PATH"] = os.pathsep.join([*first, *(p for p in path if p not in first)])
    return env


def tool_bins(tools: Sequence[Path]) -> list[str]:
    """What ``--agent-tools`` puts first on ``PATH``: each directory's ``bin/``, else itself."""
    return [str(d / "bin") if (d / "bin").is_dir() else str(d) for d in tools]


def wrapped(argv: list[str], launch: AgentLaunch) -> list[str]:
    """``argv`` as the launch wraps it inside the sandbox (the model gateway's relay)."""
    return launch.wrap(argv) if launch.wrap is not None else argv


def workspace_argv(argv: Sequence[str], workspace: Path) -> list[str]:
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


def warn_cgroup(reason: str, *, uncapped: bool) -> str:
    """Say on stderr what of the agent's CPU and memory is not capped or measured."""
    text = (
        f"the agent's CPU, memory and processes are neither capped nor measured: {reason} "
        "(run as root with cgroup v1 or v2 controllers mounted)"
        if uncapped
        else f"the agent's cgroup is incomplete: {reason}"
    )
    print(f"warning: {text}", file=sys.stderr, flush=True)
    return text


def run_cgroup(run_id: str, limits: Limits) -> tuple[RunCgroup | None, str | None]:
    """The run's cgroup (None where cgroups cannot be used) and what to warn about."""
    try:
        cgroup = create_run_cgroup(run_id, limits)
    except CgroupsUnavailable as exc:
        return None, warn_cgroup(f"cgroups cannot be used here: {exc}", uncapped=True)
    if cgroup.missing:
        return cgroup, warn_cgroup("; ".join(cgroup.missing), uncapped=False)
    return cgroup, None


class ProcessConfinement(Confinement):
    """An agent process on this host in the run's cgroup (or, without one, its process
    group); ``pass_fds`` are the parent's ends of what the child inherits, closed once it
    started (or when the confinement closes, if it never did)."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        launch: AgentLaunch,
        *,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.argv = argv
        self.env = env
        self.pass_fds = pass_fds
        self._open_fds = list(pass_fds)
        self._cgroup, self.cgroup_warning = run_cgroup(launch.run_id, launch.limits)
        self.procs_files = self._cgroup.procs_files if self._cgroup is not None else []
        self.cgroup = f"v{self._cgroup.version}" if self._cgroup is not None else "none"
        self._proc: subprocess.Popen[bytes] | None = None
        self._usage: Usage | None = None
        self._closed = False

    def _close_fds(self) -> None:
        while self._open_fds:
            os.close(self._open_fds.pop())

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        self._close_fds()
        self._proc = proc
        if self._cgroup is None:
            return
        # The launcher entered the cgroup itself before exec (no child escapes that
        # race); this write is the check that it could.
        try:
            self._cgroup.join(proc.pid)
        except ProcessLookupError:
            pass  # already gone: it started nothing that is still running
        except OSError as exc:
            self.cgroup_warning = warn_cgroup(
                f"the agent could not be put in its cgroup ({exc})", uncapped=True
            )

    def sample(self) -> None:
        if self._cgroup is not None:
            self._cgroup.sample()

    def cpu_s(self) -> float | None:
        return self._cgroup.cpu_s() if self._cgroup is not None else None

    def freeze(self) -> str:
        if self._cgroup is not None:
            return self._cgroup.freeze()
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGSTOP)
        return "SIGSTOP (process group)"

    def thaw(self) -> None:
        if self._cgroup is not None:
            self._cgroup.thaw()
        elif self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGCONT)

    def kill_all(self) -> None:
        # Whatever is left in its cgroup (a process that left the group: setsid).
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def close(self) -> Usage | None:
        if not self._closed:
            self._closed = True
            self._close_fds()
            if self._cgroup is not None:
                self._usage = self._cgroup.close()
        return self._usage
