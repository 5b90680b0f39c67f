"""The docker CLI as the harness uses it: one place for its errors, labels and clean-up.

Every container the harness makes (the agent's, :mod:`.container`; the
evaluator's, :mod:`.evaluator`; short-lived probes, :mod:`.images`)
goes through :func:`docker`. Each is labelled with its role, its run and its owner
(boot id, pid and start time of the harness process, :func:`owner_labels`), so that
a :class:`Reaper` removes it when the harness dies however it dies, and
:func:`sweep_orphans` removes those of a harness that is gone. Failures that a user
fixes (no docker, no daemon) are :class:`DockerError` saying what to run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ale_robotics.sandboxes.errors import HarnessError, SandboxError

__all__ = [
    "DEFAULT_AGENT_IMAGE",
    "DEFAULT_EVALUATOR_IMAGE",
    "LABEL_OWNER",
    "LABEL_ROLE",
    "LABEL_RUN",
    "MAKE_IMAGES",
    "DockerError",
    "Reaper",
    "docker",
    "docker_available",
    "docker_exe",
    "last_line",
    "owner_labels",
    "require_docker",
    "sweep_orphans",
]

DEFAULT_AGENT_IMAGE = "ale-robotics/agent:latest"
DEFAULT_EVALUATOR_IMAGE = "ale-robotics/evaluator:latest"

LABEL_ROLE = "ale-robotics.role"
LABEL_RUN = "ale-robotics.run"
LABEL_OWNER = "ale-robotics.owner"

MAKE_IMAGES = (
    "'make images' (it builds ale-robotics/agent:latest and ale-robotics/evaluator:latest)"
)


class DockerError(SandboxError):
    """Docker cannot run the run's containers here; the message says what to do."""


# ----------------------------------------------------------------- the CLI ---


def docker_exe() -> str:
    """The docker CLI's path; :class:`DockerError` when there is none."""
    found = shutil.which("docker")
    if found is None:
        raise DockerError(
            "docker is not installed (no 'docker' on PATH): run 'make docker-deps' (installs "
            f"Debian's docker.io and starts dockerd), then {MAKE_IMAGES}"
        )
    return found


_REACHABLE: set[str] = set()


def require_docker() -> str:
    """The docker CLI's path, once its daemon answered (a success is remembered)."""
    exe = docker_exe()
    if exe in _REACHABLE:
        return exe
    try:
        proc = subprocess.run(
            [exe, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    else:
        lines = proc.stderr.strip().splitlines()
        problem = (
            "" if proc.returncode == 0 else (lines[-1] if lines else f"exit {proc.returncode}")
        )
    if problem:
        raise DockerError(
            f"the Docker daemon cannot be reached ({problem}): start it ('make docker-deps' "
            "starts dockerd when it is not running), or run as a user of the docker group"
        )
    _REACHABLE.add(exe)
    return exe


def docker_available() -> bool:
    """True when the docker CLI is installed and its daemon answers."""
    try:
        require_docker()
    except DockerError:
        return False
    return True


def docker(
    *args: str,
    timeout: float = 120.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS`` and return it; :class:`HarnessError` (with docker's message) on a
    non-zero exit when ``check``."""
    exe = docker_exe()
    try:
        proc = subprocess.run(
            [exe, *args],
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise HarnessError(f"'docker {args[0]}' did not answer within {timeout:g} s") from None
    if check and proc.returncode != 0:
        raise HarnessError(f"'docker {' '.join(args[:2])}' failed: {last_line(proc.stderr)}")
    return proc


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


# ----------------------------------------------------------- ownership ---


def _proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def owner_labels(run_id: str, role: str) -> list[str]:
    """``--label`` arguments naming the run, the role and this harness process."""
    owner = f"{_boot_id()}:{os.getpid()}:{_proc_start_time(os.getpid())}"
    return [
        "--label", f"{LABEL_ROLE}={role}",
        "--label", f"{LABEL_RUN}={run_id}",
        "--label", f"{LABEL_OWNER}={owner}",
    ]  # fmt: skip


def _owner_alive(owner: str) -> bool:
    boot, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if boot != _boot_id():
        return True  # another host's (a shared daemon): not ours to judge
    try:
        return _proc_start_time(int(pid)) == started
    except ValueError:
        return True


def sweep_orphans() -> list[str]:
    """Remove the containers of harnesses that are gone (killed before their reaper ran)."""
    proc = docker(
        "ps", "-a", "--filter", f"label={LABEL_OWNER}",
        "--format", '{{.ID}} {{.Label "' + LABEL_OWNER + '"}}',
        check=False,
    )  # fmt: skip
    dead = []
    for line in proc.stdout.splitlines():
        cid, _, owner = line.partition(" ")
        if cid and not _owner_alive(owner):
            dead.append(cid)
    if dead:
        docker("rm", "-f", *dead, check=False)
    return dead


class Reaper:
    """Removes ``names`` (containers) when this process dies, however it dies.

    A ``/bin/sh`` in a session of its own blocks reading a pipe whose only write end
    this process holds (close-on-exec, so no child inherits it); when the process
    exits, even by ``SIGKILL``, the read returns and the shell runs ``docker rm -f``.
    :meth:`disarm` ends it once the containers are gone the ordinary way.
    """

    def __init__(self, names: Sequence[str]) -> None:
        read_end, self._write_end = os.pipe()
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                ["/bin/sh", "-c", 'read _ || :; exec "$0" rm -f "$@" >/dev/null 2>&1',
                 docker_exe(), *names],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(read_end)

    def disarm(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        os.close(self._write_end)
