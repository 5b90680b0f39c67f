"""The docker-exec loopback client: the harness's way into an evaluator container.

An evaluator in a container keeps its harness socket inside the container (no
mount shows it to anyone). The harness reaches it as the seed's topology says,
through ``docker exec`` of this client inside the evaluator container::

    docker exec -i CONTAINER python -m ale_robotics.harness.loopback unix:///tmp/ale/harness.sock

It connects to that socket and copies bytes both ways, stdin to the socket and
the socket to stdout, until either side closes: one gRPC connection (HTTP/2) of
the harness's, carried over the exec's stdio. Only who can ``docker exec`` into
the evaluator container (root or the docker group, never the agent, whose
container has no Docker socket and no network) can use it; the harness token is
still required on every call. The harness side is
:class:`ale_robotics.sandboxes.docker.evaluator.LoopbackProxy`.

Standard library only, and nothing of this package is imported beyond its
``__init__``: it starts in well under a second.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

__all__ = ["main", "pump"]

CHUNK = 256 * 1024


def pump(read_fd: int, sock: socket.socket) -> None:
    """Copy ``read_fd`` (stdin) into ``sock`` until EOF, then half-close the socket."""
    with contextlib.suppress(OSError):
        while data := os.read(read_fd, CHUNK):
            sock.sendall(data)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def main(argv: list[str] | None = None) -> int:
    """``loopback unix:///PATH``: bridge stdio to that Unix socket; 0 when either side ends."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].startswith("unix://"):
        print("usage: python -m ale_robotics.harness.loopback unix:///PATH", file=sys.stderr)
        return 2
    path = args[0].removeprefix("unix://")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        print(f"loopback: cannot connect to {path}: {exc.strerror}", file=sys.stderr)
        return 1
    threading.Thread(target=pump, args=(0, sock), daemon=True).start()
    with contextlib.suppress(OSError):
        while data := sock.recv(CHUNK):
            _write_all(1, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
