"""The agent side of an Inspect sample's ALE run: runs the Inspect tools' calls in the sandbox.

An Inspect agent has no process of its own: its tools (``bash``, ``python``, the text
editor) call the sample's sandbox, whose ``exec``, ``read_file`` and ``write_file``
must act *inside* the ALE run's sandbox, with its confinement and limits. So the run's
agent command is this program: the harness starts it in the sandbox (bwrap, docker or
none) like any agent, with the agent's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``,
``ALE_SUBMISSION_DIR``, ``ALE_TASK_DIR``), and it connects to the sample's channel, a
Unix socket in a directory the sandbox shows it (:mod:`.channel` listens there), then
does what each request asks and answers it:

* ``exec``: the command as a child of this process (so in the run's namespaces, cgroup
  and file-size limit), its working directory the scratch directory unless told, its
  environment this one's plus the request's (``PATH`` starting with this Python's
  directory, so that a tool's ``python`` has the SDK), output capped at
  :data:`OUTPUT_CAP` a stream;
* ``read`` / ``write``: a file as this process sees it (so another run's directory,
  the harness socket and the evaluator's state do not exist here);
* ``exit``: end, exit 0: the agent is done and the run goes on to its evaluation.

Requests and answers are JSON lines, each with the request's ``id``; requests are
served on threads of their own, so that a long command does not hold up the others.
The standard library only, with nothing of ``ale_robotics`` imported: an agent image
need not hold more than a Python.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

OUTPUT_CAP = 10 * 1024 * 1024
"""Bytes kept of each of a command's streams (Inspect's default limit): the tail is kept."""

READ_CAP = 100 * 1024 * 1024
"""Largest file ``read`` returns (Inspect's default); a larger one is an error."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _error(exc: BaseException) -> dict[str, Any]:
    """A failure as its answer: the exception's type and message, and for an ``OSError``
    its errno, text and file name, so that the sample's side can rebuild it."""
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, OSError):
        filename = exc.filename if isinstance(exc.filename, str) else None
        error.update(errno=exc.errno, strerror=exc.strerror, filename=filename)
    return {"error": error}


def _path(name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else Path.cwd() / path


def run_command(req: dict[str, Any]) -> dict[str, Any]:
    """One ``exec`` request, answered with the exit status and both streams."""
    cmd = [str(a) for a in req["cmd"]]
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (req.get("env") or {}).items()})
    stdin = base64.b64decode(req["input"]) if req.get("input") is not None else None
    cwd = _path(req["cwd"]) if req.get("cwd") else None
    timeout = req.get("timeout")
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        # A program that cannot be started is a failed command, as a shell reports it:
        # 127 not found, 126 any other reason (no permission, not a directory, not an
        # executable, arguments too long, ...). A NUL in the command or its environment
        # is a ValueError: an error answer, which the sample's side makes a tool error.
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return {"returncode": code, "stdout": "", "stderr": _b64(f"{exc}\n".encode())}
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return {"timed_out": True}
    return {
        "returncode": proc.returncode,
        "stdout": _b64(out[-OUTPUT_CAP:]),
        "stderr": _b64(err[-OUTPUT_CAP:]),
    }


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        proc.kill()
    proc.communicate()


def read_file(req: dict[str, Any]) -> dict[str, Any]:
    path = _path(req["path"])
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    size = path.stat().st_size
    if size > READ_CAP:
        return {"error": {"type": "OutputLimitExceeded", "message": f"{path}: {size} bytes"}}
    return {"data": _b64(path.read_bytes())}


def write_file(req: dict[str, Any]) -> dict[str, Any]:
    path = _path(req["path"])
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(req["data"]))
    return {}


_OPS = {"exec": run_command, "read": read_file, "write": write_file}


class _Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()

    def answer(self, req_id: object, body: dict[str, Any]) -> None:
        line = json.dumps({"id": req_id, **body}).encode() + b"\n"
        with self.lock:
            self.sock.sendall(line)

    def serve(self, req: dict[str, Any]) -> None:
        op = _OPS.get(str(req.get("op")))
        try:
            body = op(req) if op is not None else _error(ValueError(f"no op {req.get('op')!r}"))
        except Exception as exc:  # every failure is the caller's answer, never this loop's end
            body = _error(exc)
        with contextlib.suppress(OSError):  # the channel closed: the run is ending
            self.answer(req.get("id"), body)


def main(argv: list[str]) -> int:
    """Connect to the channel at ``argv[0]`` and serve it until ``exit`` or its end."""
    if len(argv) != 1:
        print("usage: python -m ale_robotics.inspect.toolbox SOCKET", file=sys.stderr)
        return 2
    # `python` in a tool's shell is this Python, the one with the SDK (ale_robotics.client).
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(argv[0])
    server = _Server(sock)
    server.answer(None, {"ready": True, "cwd": os.getcwd(), "pid": os.getpid()})
    with sock.makefile("rb") as lines:
        for raw in lines:
            req = json.loads(raw)
            if req.get("op") == "exit":
                server.answer(req.get("id"), {})
                return 0
            threading.Thread(target=server.serve, args=(req,), daemon=True).start()
    return 0  # the sample's side closed the channel: nothing more will be asked


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
