"""The container agent sandbox (``--sandbox docker``): the agent in a container of its own.

What an operator deploys (docs/architecture.md#storage-scale-deployment): the agent's
image (the base one from
``make images``, ``ale-robotics/agent``, or one built ``FROM`` it with the agent's
code) runs with

* **no network**: ``--network none`` (a loopback device of its own only); the
  evaluator is reached through its agent Unix socket, whose *directory* is
  bind-mounted read-only at :data:`SOCKET_MOUNT` (never the harness socket's); a run
  with a model gateway has its socket's directory read-only at :data:`GATEWAY_MOUNT`
  and the agent command started behind the relay
  (:mod:`ale_robotics.gateway.relay`, run from the image's own ``ale_robotics``
  package by the image's ``python3``), which listens on the container's own loopback;
* **a non-root user**: uid/gid 65534 when the harness is root (the scratch and
  submission directories are handed to it), else the harness's own uid; no
  capabilities (``--cap-drop ALL``), ``no-new-privileges``, an init process
  (``--init``) that forwards signals and reaps orphans, a hostname of its own;
* **a read-only root file system** (``--read-only``) and, read-write, only
  the run's scratch directory (:data:`SCRATCH_MOUNT`, its working directory) and
  submission directory (:data:`SUBMISSION_MOUNT`), plus a RAM-backed ``/tmp`` and
  ``/dev/shm`` capped at ``tmp_size_bytes``. Nothing else of the host is mounted:
  the evaluator's state dir, the run directories, the workspace and the harness
  socket do not exist inside. The agent's code comes from the image (its working
  directory, ``/workspace`` in the base image);
* **limits from the task's budget** (:func:`ale_robotics.harness.agent.proc.agent_limits`,
  as under bubblewrap): ``--cpus``, ``--memory`` (= ``--memory-swap``: no swap),
  ``--pids-limit``, and ``RLIMIT_FSIZE`` (``--ulimit fsize``) at the disk quota;
* **no log kept by the daemon** (``--log-driver none``): its output reaches the
  harness through ``docker start --attach`` and is capped in ``agent.log``.

**Arguments.** ``--agent`` is run inside the image: a bare command is looked up on
the image's ``PATH`` and relative arguments that name files of the image's working
directory are made absolute (as :func:`ale_robotics.sandboxes.process.workspace_argv` does for the
host workspace), by a short-lived probe container (:func:`.images.resolve_in_image`), so
that the agent itself can run in its scratch directory. A command the image does
not have is refused before the run starts.

**Hidden modules.** A task's ``hidden_module_names`` (``metaworld.policies``, or the
simulator family of a task whose simulator runs only in the evaluator) are located in
the image by its own Python (:func:`.images.modules_in_image`, without importing them) and
covered as bubblewrap covers the host's: a read-only empty tmpfs holding only
``_import_blocker.py`` as ``__init__.py``, or that file over a module file. The base
agent image ships no simulator; what an image vendors under another name is its own.

**Lifetime.** The container is created (``docker create``) and started attached
by the harness; it is labelled with the run and with its owner (boot id, pid and
start time of the harness process). It dies with the run in every way a run ends:
at its budget, quota or exit (``docker kill``, then ``docker rm -f``), on Ctrl-C or
SIGTERM (the same, from the harness's clean-up), and when the harness itself is
killed (``SIGKILL``): a reaper process in a session of its own holds the read end
of a pipe only the harness writes to, and removes the container when that pipe
closes (:class:`.cli.Reaper`). Containers of owners that are gone are swept
when a later run starts (:func:`.cli.sweep_orphans`).

**Measurements.** Docker makes the container's cgroup; its counters (CPU time, peak
memory) are sampled while it runs (they vanish with it), and an OOM kill is read
from the container's state. Freezing (host-timed tasks) is ``docker pause``.

**Failures** (no ``docker``, no daemon, a missing image) are
:class:`.cli.DockerError`
(a :class:`~ale_robotics.sandboxes.errors.SandboxError`) saying what to run (``make docker-deps``,
``make images``), raised before the run directory exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ale_robotics.sandboxes.base import AGENT_HOME, AgentWrap
from ale_robotics.sandboxes.cgroup_setup import parse_mounts
from ale_robotics.sandboxes.cgroups import Limits, RunCgroup, Usage
from ale_robotics.sandboxes.docker.cli import (
    DEFAULT_AGENT_IMAGE,
    Reaper,
    docker,
    docker_exe,
    owner_labels,
    require_docker,
    sweep_orphans,
)
from ale_robotics.sandboxes.docker.images import (
    ImageInfo,
    agent_user,
    modules_in_image,
    require_image,
    resolve_in_image,
)
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.sandboxes.hidden import IMPORT_BLOCKER
from ale_robotics.sandboxes.process import tool_bins

__all__ = [
    "GATEWAY_MOUNT",
    "SCRATCH_MOUNT",
    "SOCKET_MOUNT",
    "SUBMISSION_MOUNT",
    "AgentContainer",
    "launch_agent_container",
]

SUBMISSION_MOUNT = "/submission"
SCRATCH_MOUNT = "/scratch"
SOCKET_MOUNT = "/run/ale/agent"
TASK_MOUNT = "/task"
"""Where the container shows the run's task packet (read-only), ``ALE_TASK_DIR``."""
GATEWAY_MOUNT = "/run/ale/gateway"
"""Where the container shows the model gateway's socket directory (read-only)."""
RELAY_MODULE = "ale_robotics.gateway.relay"
"""The model gateway's relay, run by its file from the agent image's ``ale_robotics``."""


def _block_import_mounts(paths: Sequence[str]) -> list[str]:
    """Mounts that make each package directory or module file unimportable in the container:
    a read-only, empty tmpfs over a package holding only the blocker as ``__init__.py``, or
    the blocker over a module file (as
    :func:`ale_robotics.sandboxes.bwrap.command.bwrap_command` does)."""
    args: list[str] = []
    blocker = f"type=bind,source={IMPORT_BLOCKER},readonly"
    for path in paths:
        if path.endswith((".py", ".so", ".pyc")):
            args += ["--mount", f"{blocker},target={path}"]
        else:
            args += ["--mount", f"type=tmpfs,target={path},tmpfs-mode=0555"]
            args += ["--mount", f"{blocker},target={path}/__init__.py"]
    return args


# ------------------------------------------------------- agent container ---


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Hand ``root`` and what it holds to the agent's uid (no symlink is followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)
    os.chown(root, uid, gid)


def _expose_socket(sock: Path, uid: int) -> None:
    """Let ``uid`` connect to the agent socket (its directory is private on the host)."""
    st = sock.stat()
    if st.st_uid == uid or st.st_mode & 0o002:
        return
    try:
        os.chmod(sock, 0o666)
        os.chmod(sock.parent, sock.parent.stat().st_mode | 0o111)
    except OSError as exc:
        raise HarnessError(
            f"the agent socket {sock} cannot be opened to the agent container's uid {uid} "
            f"({exc.strerror}); run the harness as the socket's owner or as root"
        ) from None


def _bind(source: Path, target: str, *, readonly: bool = False) -> list[str]:
    if "," in str(source) or "=" in str(source):
        raise HarnessError(f"{source}: a path with ',' or '=' cannot be mounted into a container")
    spec = f"type=bind,source={source},target={target}"
    return ["--mount", spec + (",readonly" if readonly else "")]


@dataclass
class AgentContainer:
    """One run's agent container: created, then started attached; sampled; removed.

    Plays the part of the run's cgroup for :mod:`ale_robotics.harness.agent.proc` (``sample``,
    ``cpu_s``, ``freeze``/``thaw``, ``kill_all``, ``close``), since Docker makes
    and owns the container's cgroup.
    """

    name: str
    image: ImageInfo
    limits: Limits
    procs_files: list[Path] = field(default_factory=list)
    """Nothing for the agent's launcher to enter: Docker puts the container in its cgroup."""
    warning: str | None = None
    container_id: str = ""
    _reaper: Reaper | None = None
    _cgroup: RunCgroup | None = None
    _first_sample: float | None = None
    _cpu_s: float | None = None
    _peak: int | None = None
    _oom: int | None = None
    _paused: bool = False
    _state: dict[str, object] | None = None

    @classmethod
    def create(
        cls,
        *,
        run_id: str,
        image: ImageInfo,
        argv: Sequence[str],
        env: Mapping[str, str],
        scratch: Path,
        submission: Path,
        agent_socket: Path,
        limits: Limits,
        max_file_bytes: int,
        tmp_size_bytes: int = 2 * 1024**3,
        hidden_paths: Sequence[str] = (),
        task_dir: Path | None = None,
        gateway_dir: Path | None = None,
        tools: Sequence[Path] = (),
    ) -> AgentContainer:
        """``docker create`` the agent's container (not started); see the module doc.

        ``env`` holds the agent's variables (values as the container sees them); they
        reach it by name (``-e NAME``) from the docker CLI's environment, never on a
        command line.
        """
        require_docker()
        uid, gid = agent_user()
        if os.geteuid() == 0:
            _chown_tree(scratch, uid, gid)
            _chown_tree(submission, uid, gid)
        _expose_socket(agent_socket, uid)
        if gateway_dir is not None:
            for sock in gateway_dir.iterdir():
                if sock.is_socket():
                    _expose_socket(sock, uid)
        sweep_orphans()
        name = f"ale-agent-{run_id}"
        container = cls(name=name, image=image, limits=limits)
        container._reaper = Reaper([name])
        args = [
            "create", "--name", name, *owner_labels(run_id, "agent"),
            "--init", "--network", "none", "--read-only",
            "--user", f"{uid}:{gid}", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--ipc", "private",
            "--hostname", "ale-sandbox", "--log-driver", "none",
            *_bind(scratch, SCRATCH_MOUNT),
            *_bind(submission, SUBMISSION_MOUNT),
            *_bind(agent_socket.parent, SOCKET_MOUNT, readonly=True),
            *(_bind(task_dir, TASK_MOUNT, readonly=True) if task_dir is not None else []),
            *(_bind(gateway_dir, GATEWAY_MOUNT, readonly=True) if gateway_dir else []),
            *(arg for tool in tools for arg in _bind(tool, str(tool), readonly=True)),
            "--tmpfs", f"/tmp:rw,nosuid,nodev,size={tmp_size_bytes},mode=1777",
            "--shm-size", str(tmp_size_bytes),
            "--ulimit", f"fsize={max_file_bytes}:{max_file_bytes}",
            "--workdir", SCRATCH_MOUNT,
            *_block_import_mounts(hidden_paths),
        ]  # fmt: skip
        if limits.cpus is not None:
            args += ["--cpus", f"{min(limits.cpus, float(os.cpu_count() or 1)):.3f}"]
        if limits.memory_bytes is not None:
            mem = str(max(limits.memory_bytes, 6 * 1024**2))  # Docker's minimum
            args += ["--memory", mem, "--memory-swap", mem]
        if limits.pids_max is not None:
            args += ["--pids-limit", str(limits.pids_max)]
        for key in env:
            args += ["-e", key]
        args += ["--entrypoint", argv[0], image.id, *argv[1:]]
        cli_env = {k: v for k, v in os.environ.items() if k in _CLI_ENV or k.startswith("DOCKER_")}
        cli_env.update(env)
        try:
            container.container_id = docker(*args, env=cli_env).stdout.strip()
        except BaseException:
            container.remove()
            raise
        return container

    def start_argv(self) -> list[str]:
        """The command that starts the container and streams its output until it exits."""
        return [docker_exe(), "start", "--attach", self.name]

    # ------------------------------------------------- the cgroup's part ---

    def join(self, pid: int) -> None:
        """Nothing to join: the docker CLI is not the agent."""

    def sample(self) -> None:
        """Read the container's counters while it runs (they go with it)."""
        if self._first_sample is None:
            self._first_sample = time.monotonic()
        if self._cgroup is None and self.container_id:
            self._cgroup = _container_cgroup(self.container_id, self.limits)
        cg = self._cgroup
        if cg is None:
            return
        cg.sample()
        cpu, peak, oom = cg.cpu_s(), cg.peak_memory_bytes(), cg.oom_kills()
        if cpu is not None:
            self._cpu_s = cpu
        if peak is not None:
            self._peak = max(peak, self._peak or 0)
        if oom is not None:
            self._oom = oom

    def cpu_s(self) -> float | None:
        self.sample()
        return self._cpu_s

    def freeze(self, timeout_s: float = 5.0) -> str:
        """``docker pause``: every process of the container stops at once."""
        self._paused = docker("pause", self.name, check=False).returncode == 0
        return "docker pause"

    def thaw(self) -> None:
        if self._paused:
            docker("unpause", self.name, check=False)
            self._paused = False

    def kill_all(self, timeout_s: float = 5.0) -> int:
        """SIGKILL the whole container (a no-op once it has exited); 1 if it was running."""
        self.thaw()
        return int(docker("kill", self.name, check=False).returncode == 0)

    def close(self) -> Usage:
        """Kill it if it still runs, keep its final state, remove it; what it used."""
        self.sample()
        self.kill_all()
        proc = docker("inspect", "--format", "{{json .State}}", self.name, check=False)
        if proc.returncode == 0:
            with contextlib.suppress(ValueError):
                self._state = json.loads(proc.stdout)
        self.remove()
        ran_s = 0.0 if self._first_sample is None else time.monotonic() - self._first_sample
        if self._cgroup is None and ran_s > 1.0:
            self.warning = (
                "the agent container's cgroup was not found (Docker's cgroupfs or systemd "
                "layout expected), so its CPU time and peak memory were not measured; its "
                "limits held (Docker applied them)"
            )
        oom = self._oom
        if self._state is not None and self._state.get("OOMKilled"):
            oom = max(oom or 0, 1)
        return Usage(cpu_s=self._cpu_s, peak_memory_bytes=self._peak, oom_kills=oom)

    def remove(self) -> None:
        docker("rm", "-f", self.name, check=False)
        if self._reaper is not None:
            self._reaper.disarm()
            self._reaper = None

    def exit_code(self, cli_code: int | None) -> int | None:
        """The container's exit status as Docker recorded it (else the CLI's)."""
        code = (self._state or {}).get("ExitCode")
        return code if isinstance(code, int) else cli_code

    def check_started(self, *, killed: bool, log_tail: str) -> None:
        """Raise :class:`HarnessError` when the container never ran the agent command.

        Docker's own record says so (an error, or no start time), which the agent
        cannot fake by its exit code; a container the harness killed is no failure.
        """
        state = self._state or {}
        error = str(state.get("Error") or "")
        started = str(state.get("StartedAt") or "")
        if killed or (not error and started and not started.startswith("0001-")):
            return
        raise HarnessError(
            f"the agent container did not start ({error or log_tail or 'no reason given'}); "
            "this is an infrastructure problem, not the agent's score: check the agent "
            f"image {self.image.ref!r} (docker run --rm {self.image.ref} works?) or run "
            "with --sandbox bwrap"
        )


def launch_agent_container(
    *,
    run_id: str,
    task_id: str,
    image: str | None,
    argv: Sequence[str],
    agent_endpoint: str,
    agent_token: str,
    scratch: Path,
    submission: Path,
    limits: Limits,
    max_file_bytes: int,
    hidden_modules: Sequence[str] = (),
    task_dir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    gateway_dir: Path | None = None,
    wrap: AgentWrap | None = None,
    tools: Sequence[Path] = (),
) -> AgentContainer:
    """The run's agent container, created and ready for :meth:`AgentContainer.start_argv`.

    ``argv`` is the ``--agent`` command as given; the container sees the agent
    socket's directory at :data:`SOCKET_MOUNT`, so the endpoint is rewritten to it.
    ``hidden_modules`` (the task's,
    :func:`ale_robotics.harness.agent.hidden_modules.hidden_module_names`) are looked up in
    the image and made unimportable there, as bubblewrap does on the host.
    ``extra_env``, ``gateway_dir`` and ``wrap``: the run's model gateway (its variables,
    its socket's directory, shown at :data:`GATEWAY_MOUNT`, and the relay around the
    command); the relay must be in the image (it is in ``ale-robotics/agent``).
    ``tools`` (``--agent-tools``) are shown read-only at their own path, each one's
    ``bin/`` (else itself) first on the image's ``PATH``; ``HOME`` is a directory of the
    agent's own in its scratch directory.
    """
    if not agent_endpoint.startswith("unix://"):
        raise HarnessError(
            "the agent container has no network: the evaluator's agent channel must be a "
            "Unix socket (unix://...)"
        )
    sock = Path(agent_endpoint.removeprefix("unix://"))
    info = require_image(image or DEFAULT_AGENT_IMAGE, "agent")
    uid, gid = agent_user()
    resolved = resolve_in_image(info, tuple(argv), f"{uid}:{gid}")
    env = {
        "ALE_ENDPOINT": f"unix://{SOCKET_MOUNT}/{sock.name}",
        "ALE_TOKEN": agent_token,
        "ALE_TASK_ID": task_id,
        "ALE_RUN_ID": run_id,
        "ALE_SUBMISSION_DIR": SUBMISSION_MOUNT,
        "ALE_WORKSPACE": resolved.working_dir,
        "ALE_SCRATCH_DIR": SCRATCH_MOUNT,
        "HOME": f"{SCRATCH_MOUNT}/{AGENT_HOME}",
        "TMPDIR": "/tmp",
        "PYTHONUNBUFFERED": "1",
    }
    if task_dir is not None:  # the run's task packet, read-only at TASK_MOUNT
        env["ALE_TASK_DIR"] = TASK_MOUNT
    env.update(extra_env or {})
    if tools:
        env["PATH"] = ":".join([*tool_bins(tools), info.path])
    argv = resolved.argv
    if wrap is not None:
        if gateway_dir is None:
            raise HarnessError("the model gateway's relay needs its socket directory")
        argv = wrap(
            argv,
            "python3",
            relay=_relay_in_image(info, f"{uid}:{gid}"),
            socket_dir=GATEWAY_MOUNT,
        )
    hidden = modules_in_image(info, tuple(hidden_modules), f"{uid}:{gid}") if hidden_modules else ()
    return AgentContainer.create(
        hidden_paths=hidden,
        run_id=run_id,
        image=info,
        argv=argv,
        env=env,
        scratch=scratch,
        submission=submission,
        agent_socket=sock,
        limits=limits,
        max_file_bytes=max_file_bytes,
        task_dir=task_dir,
        gateway_dir=gateway_dir,
        tools=tools,
    )


def _relay_in_image(image: ImageInfo, user: str) -> str:
    """The model gateway relay's file in ``image`` (refused when the image has none)."""
    found = modules_in_image(image, (RELAY_MODULE,), user)
    if not found or not found[0].endswith(".py"):
        raise HarnessError(
            f"the agent image {image.ref!r} has no {RELAY_MODULE} (the ale-robotics package "
            "with python3), which the model gateway needs in the container: build the image "
            f"FROM {DEFAULT_AGENT_IMAGE} (make images) or run with --sandbox bwrap"
        )
    return found[0]


def _container_cgroup(container_id: str, limits: Limits) -> RunCgroup | None:
    """Docker's cgroup of a running container, where its cgroupfs or systemd driver puts
    it (a view of it for reading counters: never removed by the harness)."""
    try:
        mounts = parse_mounts(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return None
    names = (f"docker/{container_id}", f"system.slice/docker-{container_id}.scope")
    v1: dict[str, Path] = {}
    v2: list[Path] = []
    for m in mounts:
        if m.root != "/":
            continue  # a subtree (the harness itself in a container): not Docker's view
        for name in names:
            d = m.mountpoint / name
            if not d.is_dir():
                continue
            if m.version == 1:
                v1.update(dict.fromkeys(m.controllers, d))
            elif m.mountpoint == Path("/sys/fs/cgroup"):
                v2.insert(0, d)
            else:
                v2.append(d)
    if v1:
        return RunCgroup(1, v1, limits)
    return RunCgroup(2, {"": v2[0]}, limits) if v2 else None


_CLI_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_RUNTIME_DIR")
"""Of the harness's environment, what the docker CLI itself may need."""
