"""``--sandbox docker``: the agent in a container of its image (the optional extra ``docker``).

The container itself (its flags, mounts, lifetime and measurements) is
:mod:`.container`'s; this adapter checks the agent command in the image before the run,
registers the container as a live sandbox (it shows its scratch, submission and socket
directories only), and plays the part of the agent's confinement: Docker makes and caps
its cgroup, freezing is ``docker pause``, its exit status and whether it started at all
are Docker's record. It needs the docker CLI and a running daemon (``make
docker-deps``) and the images (``make images``), no Python package.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.sandboxes.base import AgentCommand, AgentLaunch, Confinement, Sandbox
from ale_robotics.sandboxes.cgroups import Usage
from ale_robotics.sandboxes.docker.cli import DEFAULT_AGENT_IMAGE, DockerError, require_docker
from ale_robotics.sandboxes.docker.container import AgentContainer, launch_agent_container
from ale_robotics.sandboxes.docker.images import agent_user, require_image, resolve_in_image
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.sandboxes.live import register
from ale_robotics.sandboxes.mount_plan import plan_mounts
from ale_robotics.sandboxes.process import agent_env, warn_cgroup
from ale_robotics.sandboxes.run_dirs import hidden_paths

__all__ = ["DockerSandbox"]


class DockerSandbox(Sandbox):
    """The container sandbox (see the module docstring and :mod:`.container`)."""

    name: ClassVar[str] = "docker"
    host_files: ClassVar[bool] = False
    serves_model_gateway: ClassVar[bool] = True  # the relay is in the agent's image
    options: ClassVar[frozenset[str]] = frozenset({"agent_image"})

    def __init__(self, *, agent_image: str | None = None) -> None:
        self.image = agent_image or DEFAULT_AGENT_IMAGE

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            require_docker()
        except DockerError as exc:
            return exc.message
        return None

    def check_command(self, cmd: AgentCommand) -> None:
        """The agent command as the agent's image has it (a probe container; cached).

        A host file named in --agent is not in the container, which mounts no host file:
        refused when it is the command's script, else a warning.
        """
        image = require_image(self.image, "agent")
        uid, gid = agent_user()
        resolved = resolve_in_image(image, cmd.argv, f"{uid}:{gid}")
        for arg, in_image in zip(cmd.argv, resolved.in_image, strict=False):
            if in_image or not os.path.isabs(arg) or not os.path.exists(arg):
                continue
            where = (
                f"{arg} (in --agent {cmd.text!r}) exists on this host but not in the agent "
                f"image {image.ref!r}: the container mounts no host files"
            )
            if arg == cmd.script:
                raise InvalidArgumentError(
                    f"{where}; put the agent's code in its image (FROM ale-robotics/agent, "
                    "COPY it into /workspace) and name it relative to the image's working "
                    f"directory {resolved.working_dir}"
                )
            print(f"warning: {where}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def prepare(self, launch: AgentLaunch) -> Iterator[Confinement]:
        if len(launch.extra_rw) > 1:
            raise HarnessError("the agent container shows one more directory at most")
        gateway_dir = launch.extra_rw[0] if launch.extra_rw else None
        # A container shows its mounts whole (no covers inside them as bubblewrap lays).
        inside = hidden_paths(launch.private_dirs, launch.tools)
        if inside:
            raise HarnessError(
                f"--agent-tools: {inside[0]} is a directory of the harness (a run, a runs "
                "root or its state) inside a tools directory, which a container would show; "
                "give the tools' own directory"
            )
        rw = [launch.scratch, launch.submission, *launch.extra_rw]
        if launch.endpoint.startswith("unix://"):
            rw.append(Path(launch.endpoint.removeprefix("unix://")).parent)
        ro = [*launch.tools, *([launch.task_dir] if launch.task_dir is not None else [])]
        with register(launch.run_id, self.name, None, plan_mounts(ro, [], rw)):
            container = launch_agent_container(
                run_id=launch.run_id,
                task_id=launch.task_id,
                image=self.image,
                argv=shlex.split(launch.agent_cmd),
                agent_endpoint=launch.endpoint,
                agent_token=launch.token,
                scratch=launch.scratch,
                submission=launch.submission,
                limits=launch.limits,
                max_file_bytes=launch.disk_quota_bytes,
                hidden_modules=launch.hidden_modules,  # e.g. metaworld.policies
                task_dir=launch.task_dir,
                extra_env=launch.extra_env,  # the model gateway's (no host path in them)
                gateway_dir=gateway_dir,  # shown at GATEWAY_MOUNT
                wrap=launch.wrap,
                tools=launch.tools,
            )
            box = _ContainerConfinement(container, agent_env(launch))
            try:
                yield box
            finally:
                box.close()  # the container is removed here, whatever happened


class _ContainerConfinement(Confinement):
    """The agent's container as its confinement; the harness starts ``docker start
    --attach`` (its output is the agent's)."""

    def __init__(self, container: AgentContainer, env: dict[str, str]) -> None:
        self._container = container
        self.argv = container.start_argv()
        self.env = env
        self.procs_files = container.procs_files
        self.cgroup = "docker"
        self.cgroup_warning = None
        self._usage: Usage | None = None
        self._closed = False

    def describe(self) -> dict[str, object]:
        return {"image": self._container.image.ref, "image_id": self._container.image.id}

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        self._container.join(proc.pid)  # nothing to join: Docker put it in its cgroup

    def sample(self) -> None:
        self._container.sample()

    def cpu_s(self) -> float | None:
        return self._container.cpu_s()

    def freeze(self) -> str:
        return self._container.freeze()

    def thaw(self) -> None:
        self._container.thaw()

    def kill_all(self) -> None:
        self._container.kill_all()

    def close(self) -> Usage | None:
        if not self._closed:
            self._closed = True
            self._usage = self._container.close()
            if self._container.warning is not None:
                self.cgroup_warning = warn_cgroup(self._container.warning, uncapped=False)
        return self._usage

    def exit_code(self, launcher_code: int | None) -> int | None:
        # The container's own exit status (the docker CLI's may be its reaction to a signal).
        return self._container.exit_code(launcher_code)

    def check_started(self, *, killed: bool, log_path: Path, oom: str | None) -> None:
        self._container.check_started(killed=killed, log_tail=_last_line(log_path, "Error"))


def _last_line(log_path: Path, prefix: str) -> str:
    """The log's last line starting with ``prefix`` (docker's reason), or ''."""
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    found = [ln for ln in lines if ln.startswith(prefix)]
    return found[-1] if found else ""
