"""The sandbox's side of the model gateway: a loopback TCP port relayed to its Unix socket.

The agent's sandbox has no network but its own loopback, and the SDKs speak HTTP over
TCP, so the harness starts the agent through this relay::

    python relay.py --unix /ale/gateway/gateway.sock --port 8765 -- AGENT COMMAND...

It binds ``127.0.0.1:PORT`` in the sandbox's network namespace (so the port is listening
before the agent starts), forks a child that copies every connection's bytes to and from
the gateway's socket (bound into the sandbox by the harness), and replaces itself with the
agent command: the agent keeps the process, its exit status and its signals. The child
ends with the agent (``PR_SET_PDEATHSIG``, and a check of its parent every second).
Without a command it relays in the foreground (for tests).

Standard library only, and run by path with ``python -I``: it must start in any sandbox
whatever the agent's ``PYTHONPATH`` holds.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading

__all__ = ["main", "serve"]

_CHUNK = 64 * 1024
_PR_SET_PDEATHSIG = 1


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s writing side."""
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _relay(client: socket.socket, unix_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(unix_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, unix_path: str, parent: int | None = None) -> None:
    """Relay each connection to ``listener`` until ``parent`` (a pid) is gone (or forever)."""
    listener.settimeout(1.0)
    while parent is None or os.getppid() == parent:
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        client.settimeout(None)
        threading.Thread(target=_relay, args=(client, unix_path), daemon=True).start()


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--unix", required=True, help="the gateway's Unix socket")
    parser.add_argument("--port", type=int, required=True, help="the loopback port to listen on")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the agent command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((args.host, args.port))
    except OSError as exc:
        print(f"ale model relay: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 70
    listener.listen(128)
    if not command:
        serve(listener, args.unix)
        return 0
    parent = os.getpid()
    if os.fork() == 0:  # the relay
        try:
            _die_with_parent()
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # hold none of the agent's pipes open
                os.dup2(devnull, fd)
            serve(listener, args.unix, parent)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"ale model relay: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
