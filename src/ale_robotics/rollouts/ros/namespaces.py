"""Each episode's graph in namespaces of its own: a private network and a private PID space.

The graph is started from the worker by ``unshare --fork --kill-child roslaunch ...``, whose
child is prepared (:func:`enter`, run between fork and exec) to be

* in a new **network namespace** with only its loopback, brought up here: its roscore
  listens on the usual port 11311, private to the episode (no port is chosen, none can
  collide, nothing outside can connect, and nothing inside can reach the host's network);
* the parent of a new **PID namespace**: the process ``unshare`` forks, roslaunch, is
  its pid 1, so when roslaunch dies the kernel kills every process of the graph (roscore,
  rosout and the nodes, whatever they forked or however they detached);
* killed with its parent (``PR_SET_PDEATHSIG``): when the worker dies (the evaluator
  killed mid-episode), ``unshare`` gets SIGKILL, so does roslaunch (``--kill-child``),
  and with it the namespace.

So ending a graph is one ``SIGKILL`` to ``unshare``, and nothing of it can outlive the
worker. Namespaces need ``CAP_SYS_ADMIN`` in the caller's user namespace: a worker the
executor isolated (``WorkerLimits.isolate_network``: its own user namespace) or running as
root has it; otherwise the child makes a user namespace of its own first, which the
kernel allows unless unprivileged user namespaces are off. Caps are kept only up to
``exec`` in a user namespace without a uid map, hence the work here, before it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import socket
import struct
import subprocess
import sys

__all__ = ["NamespaceError", "check", "enter"]

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH22x"


class NamespaceError(OSError):
    """The graph's namespaces cannot be made here (a host without user namespaces)."""


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        # struct ifreq: the name, then ifr_flags in a 24-byte union
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def _map_self(uid: int, gid: int) -> None:
    """In a user namespace of our own, our ids mapped to themselves (files keep owners)."""
    with contextlib.suppress(OSError), open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")


def enter() -> None:
    """Between fork and exec of the graph's first process (see the module docstring)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
        raise NamespaceError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() == 1:  # the worker died before this point
        os._exit(1)
    if libc.unshare(CLONE_NEWNET | CLONE_NEWPID) != 0:
        err = ctypes.get_errno()
        if err != errno.EPERM:
            raise NamespaceError(err, "unshare(CLONE_NEWNET | CLONE_NEWPID)")
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID) != 0:
            err = ctypes.get_errno()
            raise NamespaceError(err, "unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID)")
        _map_self(uid, gid)
    _loopback_up()


_CHECK = (
    "import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 11311)); s.listen(); "
    "socket.create_connection(('127.0.0.1', 11311)).close(); print('ok')"
)


def check() -> str | None:
    """Why a graph's namespaces cannot be made in this process, or None when they can
    (a child is made in them and binds the graph's port on its loopback)."""
    try:
        done = subprocess.run(
            ["unshare", "--fork", "--kill-child", "--", sys.executable, "-I", "-c", _CHECK],
            preexec_fn=enter,  # the namespaces are made there
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot make a network and PID namespace for the graph: {exc}"
    if done.returncode != 0 or done.stdout.strip() != "ok":
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:]
        return f"a process in the graph's namespaces failed: {' '.join(tail) or done.returncode}"
    return None
