"""``--sandbox bwrap``: the agent in Linux namespaces on this host (bubblewrap).

The command line and what it shows are :mod:`.command`'s; this adapter registers the
sandbox while it runs (:mod:`ale_robotics.sandboxes.live`: no run directory is made
where it could see it), hides every directory of the harness inside the trees it
shows, confines the agent in the run's cgroup (:mod:`ale_robotics.sandboxes.process`),
and reads bwrap's status pipe afterwards to tell "the sandbox did not start" (an
infrastructure failure) from "the agent ran and failed".
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.sandboxes.base import AgentCommand, AgentLaunch, Confinement, Sandbox
from ale_robotics.sandboxes.bwrap.command import (
    bwrap_command,
    read_sandbox_status,
    require_sandbox,
    sandbox_mounts,
    sandbox_visible,
    shown_trees,
)
from ale_robotics.sandboxes.errors import HarnessError, SandboxError
from ale_robotics.sandboxes.hidden import install_paths
from ale_robotics.sandboxes.live import register
from ale_robotics.sandboxes.mount_plan import Mount
from ale_robotics.sandboxes.process import ProcessConfinement, agent_env, workspace_argv, wrapped
from ale_robotics.sandboxes.run_dirs import hidden_paths

__all__ = ["BwrapSandbox"]


class BwrapSandbox(Sandbox):
    """The bubblewrap sandbox (see the module docstring and :mod:`.command`)."""

    name: ClassVar[str] = "bwrap"
    auto_rank: ClassVar[int | None] = 0

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            require_sandbox()
        except SandboxError as exc:
            return exc.message
        return None

    def check_command(self, cmd: AgentCommand) -> None:
        """A command or file the host has but the sandbox does not show is refused (the
        program, the script) or warned about (another argument)."""
        workspace = cmd.workspace
        visible = sandbox_visible(workspace, extra=cmd.tools)
        shows = (
            f"the agent's sandbox, which shows only its workspace {workspace} (read-only), "
            "the system directories, this Python environment and the --agent-tools "
            "directories"
        )
        needed = [a for a in (cmd.program, cmd.script) if a is not None]
        for arg in needed:
            if os.path.isabs(arg) and os.path.exists(arg) and not visible(Path(arg)):
                raise InvalidArgumentError(
                    f"{arg} (in --agent {cmd.text!r}) exists on this host but not inside "
                    f"{shows}: move it into the workspace, pass --workspace DIR for a "
                    "directory that holds it, or --agent-tools DIR for the software's own "
                    "directory (an npm or pip prefix)"
                )
        # Other paths may be meant to be missing (an agent probing what it can see).
        for arg in cmd.argv[1:]:
            if arg in needed or not os.path.isabs(arg) or not os.path.exists(arg):
                continue
            if not visible(Path(arg)):
                print(
                    f"warning: {arg} (in --agent) is not visible inside {shows}",
                    file=sys.stderr,
                    flush=True,
                )

    @contextlib.contextmanager
    def prepare(self, launch: AgentLaunch) -> Iterator[Confinement]:
        """Registered from before the command is built until the agent has ended.

        What it hides is read again once it is registered: a directory recorded
        meanwhile (:func:`ale_robotics.sandboxes.run_dirs.new_private_dirs`) is then
        hidden too, or its maker, reading the registry after recording it, refuses it.
        """
        if not launch.endpoint.startswith("unix://"):
            raise HarnessError(
                "the agent sandbox has no network: the evaluator's agent channel must be a "
                "Unix socket (unix://...), or run with --sandbox none"
            )
        sock = Path(launch.endpoint.removeprefix("unix://"))
        workspace = launch.workspace
        ro = [*launch.tools, *launch.shown]
        shown = shown_trees(workspace, extra_ro=ro)  # what is hidden in them too
        # The task packet is bound read-only after the covers (it lies in the run's own,
        # hidden, directory): the innermost mount at its path.
        extra_ro = [*ro, *([launch.task_dir] if launch.task_dir is not None else [])]

        def plan(hide: list[Path]) -> list[Mount]:
            return sandbox_mounts(
                workspace=workspace,
                scratch_dir=launch.scratch,
                submission_dir=launch.submission,
                agent_socket=sock,
                extra_ro=extra_ro,
                extra_rw=launch.extra_rw,
                hide=hide,
            )

        hide = hidden_paths(launch.private_dirs, shown)
        with register(launch.run_id, self.name, workspace, plan(hide)) as lease:
            hide = hidden_paths(launch.private_dirs, shown)
            lease.update(plan(hide))
            status_r, status_w = os.pipe()
            try:
                argv = bwrap_command(
                    wrapped(workspace_argv(shlex.split(launch.agent_cmd), workspace), launch),
                    workspace=workspace,
                    scratch_dir=launch.scratch,
                    submission_dir=launch.submission,
                    agent_socket=sock,
                    extra_ro=extra_ro,
                    extra_rw=launch.extra_rw,
                    hide=hide,
                    block_imports=install_paths(launch.hidden_modules),  # metaworld.policies
                    status_fd=status_w,
                    home=launch.home,
                )
                box = _BwrapConfinement(
                    argv, agent_env(launch), launch, pass_fds=(status_w,), status_r=status_r
                )
            except BaseException:
                os.close(status_r)
                os.close(status_w)
                raise
            try:
                yield box
            finally:
                box.close()
                box.release()


class _BwrapConfinement(ProcessConfinement):
    """The run's cgroup around bwrap, and bwrap's status pipe (``--json-status-fd``)."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        launch: AgentLaunch,
        *,
        pass_fds: tuple[int, ...],
        status_r: int,
    ) -> None:
        self._status_r: int | None = status_r
        self._workspace = launch.workspace
        super().__init__(argv, env, launch, pass_fds=pass_fds)

    def check_started(self, *, killed: bool, log_path: Path, oom: str | None) -> None:
        """Raise when bubblewrap never ran the agent (and the harness did not kill it)."""
        if self._status_r is None:
            return
        status = read_sandbox_status(self._status_r)  # closes it
        self._status_r = None
        if killed or status.agent_ran:
            return
        why = _last_line(log_path, "bwrap:") or "no reason given"
        if oom is not None:
            why = oom
        elif "execvp" in why:
            # The command was checked on the host; inside, it is not there.
            raise HarnessError(
                f"the agent command could not start inside the sandbox ({why}): the "
                f"sandbox shows only the workspace {self._workspace} (read-only), the "
                "system directories and this Python environment; put the command in the "
                "workspace or give its full path"
            )
        raise HarnessError(
            f"the agent sandbox did not start ({why}); this is an infrastructure "
            "problem, not the agent's score: fix it or run with --sandbox none"
        )

    def release(self) -> None:
        """Close the status pipe if nobody read it (the run ended before)."""
        if self._status_r is not None:
            os.close(self._status_r)
            self._status_r = None


def _last_line(log_path: Path, prefix: str) -> str:
    """The log's last line starting with ``prefix`` (bwrap's reason), or ''."""
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    found = [ln for ln in lines if ln.startswith(prefix)]
    return found[-1] if found else ""
