"""The evaluator in a container of its own, reached as the seed's topology says.

``ale-robotics run TASK --evaluator-image IMAGE`` starts, for the run, a container
of the evaluator image (``make images``: ``ale-robotics/evaluator``) running
``ale-robotics evaluator serve --run-id RUN``, and stops it when the run ends.
The two containers share only what the architecture lets them share:

* the **submission volume**: the run's ``submission/`` directory, mounted
  read-only at ``/submission`` here and read-write in the agent's container, "the
  only data path from agent to native pipeline";
* the **agent socket's directory**, a private host directory bind-mounted into
  both (the agent's read-only), so the agent's container reaches the agent channel
  and nothing else;
* the evaluator's **state dir** (secret, signing key, job store), the same one an
  embedded evaluator uses (``--state-dir``), mounted here only, so a trajectory
  verifies with the usual ``evaluator public-key``.

The **harness channel** never leaves the container: its socket is in the
container's private ``/tmp``. The harness reads the official result over its own
gRPC connection through ``docker exec`` of the loopback client
(:mod:`ale_robotics.harness.loopback`) inside the container: a
:class:`LoopbackProxy` listens on a Unix socket in a private directory of the
harness and carries each connection over one ``docker exec -i``. The agent's
container has neither a Docker socket nor a network, so it cannot exec anything.
An address ``docker-exec://CONTAINER/PATH`` names such a channel anywhere the
harness takes one (``run --evaluator-harness``): for an evaluator container
started by an operator (``deploy/compose.yaml``).

The tokens are the harness's: it writes both into a private directory mounted
read-only into the evaluator container (``--agent-token-file``,
``--harness-token-file``). The container has no network, no capabilities beyond
reading files (root inside: ``DAC_READ_SEARCH``, so a submission file the agent made
unreadable is still read), a read-only root file system and the harness's uid;
it is labelled, reaped and swept like the agent's (:mod:`.container`). Its
log is kept in ``runs/<run_id>/evaluator.log``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ale_robotics.client.sdk import AleClient
from ale_robotics.sandboxes.docker.cli import (
    MAKE_IMAGES,
    Reaper,
    docker,
    docker_exe,
    owner_labels,
    sweep_orphans,
)
from ale_robotics.sandboxes.docker.images import ImageInfo, require_image
from ale_robotics.sandboxes.errors import HarnessError

__all__ = [
    "INNER_HARNESS_SOCKET",
    "LOOPBACK_SCHEME",
    "EvaluatorContainer",
    "LoopbackClient",
    "LoopbackProxy",
    "harness_client",
    "parse_loopback_address",
    "require_evaluator_image",
]

LOOPBACK_SCHEME = "docker-exec://"
INNER_HARNESS_SOCKET = "/tmp/ale/harness.sock"
"""Where the evaluator container's harness listener is (its private tmpfs)."""
STATE_MOUNT = "/var/lib/ale/state"
TOKENS_MOUNT = "/run/ale/tokens"
AGENT_SOCKET_MOUNT = "/run/ale/agent"
SUBMISSION_MOUNT = "/submission"
LOOPBACK_CMD = ("python", "-m", "ale_robotics.harness.loopback")


def parse_loopback_address(address: str) -> tuple[str, str] | None:
    """``docker-exec://CONTAINER/PATH`` -> (container, ``unix:///PATH``); None for others."""
    if not address.startswith(LOOPBACK_SCHEME):
        return None
    container, sep, path = address[len(LOOPBACK_SCHEME) :].partition("/")
    if not container or not sep or not path:
        raise HarnessError(
            f"{address!r}: a docker-exec address is docker-exec://CONTAINER/PATH/OF/harness.sock"
        )
    return container, f"unix:///{path}"


class LoopbackProxy:
    """A Unix socket of the harness whose every connection is a ``docker exec`` of the
    loopback client in ``container``, bridged byte for byte (see the module doc)."""

    def __init__(self, container: str, inner: str, listen: Path) -> None:
        self.container = container
        self.inner = inner
        self.path = listen
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(listen))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self._closed = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="ale-loopback", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"unix://{self.path}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=self._bridge, args=(conn,), daemon=True).start()

    def _bridge(self, conn: socket.socket) -> None:
        try:
            proc = subprocess.Popen(
                [docker_exe(), "exec", "-i", self.container, *LOOPBACK_CMD, self.inner],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            conn.close()
            return
        with self._lock:
            self._procs.append(proc)
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def upstream() -> None:  # harness -> container
            with contextlib.suppress(OSError):
                while data := conn.recv(256 * 1024):
                    stdin.write(data)
                    stdin.flush()
            with contextlib.suppress(OSError):
                stdin.close()

        up = threading.Thread(target=upstream, daemon=True)
        up.start()
        with contextlib.suppress(OSError):
            while data := os.read(stdout.fileno(), 256 * 1024):
                conn.sendall(data)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()
        up.join(timeout=5)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        stdout.close()
        with self._lock:
            self._procs.remove(proc)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        self._thread.join(timeout=2)
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(OSError):
            self.path.unlink()


class LoopbackClient(AleClient):
    """An :class:`AleClient` on a ``docker-exec://`` harness channel: it runs its own
    :class:`LoopbackProxy` and closes it with the connection."""

    def __init__(self, address: str, token: str, *, task_id: str = "", run_id: str = "") -> None:
        where = parse_loopback_address(address)
        assert where is not None
        self._dir = Path(tempfile.mkdtemp(prefix="ale-lb-"))  # 0700: only this user
        self._proxy = LoopbackProxy(where[0], where[1], self._dir / "harness.sock")
        self.loopback_address = address
        super().__init__(self._proxy.address, token, task_id=task_id, run_id=run_id)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._proxy.close()
            shutil.rmtree(self._dir, ignore_errors=True)


def harness_client(address: str, token: str, *, task_id: str = "", run_id: str = "") -> AleClient:
    """The harness's client for ``address``: a :class:`LoopbackClient` for ``docker-exec://``."""
    if address.startswith(LOOPBACK_SCHEME):
        return LoopbackClient(address, token, task_id=task_id, run_id=run_id)
    return AleClient(address, token, task_id=task_id, run_id=run_id)


def _write_token(path: Path) -> str:
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


@dataclass
class EvaluatorContainer:
    """The run's evaluator container; :meth:`start` it, :meth:`stop` it (see the module doc)."""

    name: str
    image: ImageInfo
    work: Path
    """The harness's private directory: the agent socket's directory and the tokens."""
    run_dir: Path
    agent_token: str
    harness_token: str
    _reaper: Reaper | None = field(default=None, repr=False)

    @property
    def agent_socket(self) -> Path:
        return self.work / "agent" / "agent.sock"

    @property
    def agent_address(self) -> str:
        """The agent channel as the host (and a sandbox binding its directory) sees it."""
        return f"unix://{self.agent_socket}"

    @property
    def harness_address(self) -> str:
        return f"{LOOPBACK_SCHEME}{self.name}{INNER_HARNESS_SOCKET}"

    def harness_client(self, run_id: str, task_id: str = "") -> AleClient:
        return harness_client(
            self.harness_address, self.harness_token, task_id=task_id, run_id=run_id
        )

    @classmethod
    def start(
        cls,
        image: str,
        *,
        run_id: str,
        task_id: str,
        state_dir: Path,
        submission: Path,
        run_dir: Path,
        workers: int | None = None,
        timeout_s: float = 180.0,
    ) -> EvaluatorContainer:
        """Start the container and wait until both of its channels answer.

        Raises :class:`HarnessError` (with the last lines of its log) when it exits or
        does not come up within ``timeout_s``.
        """
        info = require_image(image, "evaluator")
        work = Path(tempfile.mkdtemp(prefix="ale-ev-"))  # 0700
        (work / "agent").mkdir(mode=0o755)
        (work / "tokens").mkdir(mode=0o700)
        ev = cls(
            name=f"ale-eval-{run_id}",
            image=info,
            work=work,
            run_dir=run_dir,
            agent_token=_write_token(work / "tokens" / "agent.token"),
            harness_token=_write_token(work / "tokens" / "harness.token"),
        )
        try:
            sweep_orphans()
            ev._reaper = Reaper([ev.name])
            ev._run(run_id, task_id, state_dir.resolve(), submission.resolve(), workers)
            ev._wait_ready(timeout_s)
        except BaseException:
            ev.stop()
            raise
        return ev

    def _run(
        self, run_id: str, task_id: str, state_dir: Path, submission: Path, workers: int | None
    ) -> None:
        uid, gid = os.geteuid(), os.getegid()
        caps = ["--cap-drop", "ALL"]
        if uid == 0:
            caps += ["--cap-add", "DAC_READ_SEARCH"]
        serve = [
            "ale-robotics", "evaluator", "serve", "--state-dir", STATE_MOUNT,
            "--submission-dir", SUBMISSION_MOUNT, "--task", task_id, "--run-id", run_id,
            "--agent-listen", f"unix://{AGENT_SOCKET_MOUNT}/agent.sock",
            "--harness-listen", f"unix://{INNER_HARNESS_SOCKET}",
            "--agent-token-file", f"{TOKENS_MOUNT}/agent.token",
            "--harness-token-file", f"{TOKENS_MOUNT}/harness.token",
        ]  # fmt: skip
        if workers is not None:
            serve += ["--workers", str(workers)]
        docker(
            "run", "--detach", "--name", self.name, *owner_labels(run_id, "evaluator"),
            "--init", "--network", "none", "--read-only", "--user", f"{uid}:{gid}", *caps,
            "--security-opt", "no-new-privileges",
            "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777",
            "--mount", f"type=bind,source={state_dir},target={STATE_MOUNT}",
            "--mount", f"type=bind,source={submission},target={SUBMISSION_MOUNT},readonly",
            "--mount", f"type=bind,source={self.work / 'agent'},target={AGENT_SOCKET_MOUNT}",
            "--mount", f"type=bind,source={self.work / 'tokens'},target={TOKENS_MOUNT},readonly",
            "--log-driver", "json-file", "--log-opt", "max-size=16m",
            self.image.id, *serve,
        )  # fmt: skip

    def _running(self) -> bool:
        proc = docker("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return proc.stdout.strip() == "true"

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.agent_socket.is_socket():
                # The loopback client itself, connecting and hanging up (stdin is empty).
                probe = docker(
                    "exec", self.name, *LOOPBACK_CMD, f"unix://{INNER_HARNESS_SOCKET}",
                    check=False,
                )  # fmt: skip
                if probe.returncode == 0:
                    return
                if "No module named" in probe.stderr:
                    raise HarnessError(
                        f"the evaluator image {self.image.ref!r} has no loopback client "
                        "(ale_robotics.harness.loopback): it is older than this harness; "
                        f"rebuild it with {MAKE_IMAGES}"
                    )
            if not self._running():
                raise HarnessError(
                    f"the evaluator container ({self.image.ref}) exited before it served: "
                    f"{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"the evaluator container ({self.image.ref}) did not serve within "
                    f"{timeout_s:g} s: {self.log_tail()}"
                )
            time.sleep(0.1)

    def log_tail(self, lines: int = 5) -> str:
        proc = docker("logs", "--tail", str(lines), self.name, check=False)
        text = (proc.stdout + proc.stderr).strip()
        return " | ".join(text.splitlines()[-lines:]) or "no output"

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s), keep its log, remove it."""
        docker("stop", "--time", "10", self.name, check=False, timeout=60)
        logs = docker("logs", self.name, check=False)
        if logs.returncode == 0 and self.run_dir.is_dir():
            with contextlib.suppress(OSError):
                (self.run_dir / "evaluator.log").write_text(logs.stdout + logs.stderr)
        docker("rm", "-f", self.name, check=False)
        if self._reaper is not None:
            self._reaper.disarm()
            self._reaper = None
        shutil.rmtree(self.work, ignore_errors=True)


def require_evaluator_image(image: str) -> ImageInfo:
    """The evaluator image ``image`` as this daemon has it (``--evaluator-image``, checked
    before a run starts); :class:`~.cli.DockerError` saying how to get it."""
    return require_image(image, "evaluator")
