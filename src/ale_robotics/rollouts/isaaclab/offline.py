"""Isaac Lab offline: the shipped assets, and no connection out of the engine's worker.

Isaac Lab fetches its USD assets (robots, ground planes) from NVIDIA's asset server at run
time, which fails without a network and would make a score depend on a server. The kind
points ``ISAACSIM_ASSET_ROOT`` at :data:`ASSETS` (shipped in this package) and, in every
process that builds an Isaac Lab env, refuses and records each outgoing connection and
each lookup of another host (:func:`offline`; loopback and Unix sockets stay open); a shard
after which :func:`network_attempts` is not empty fails (:class:`NetworkTried`). Imports nothing but
the standard library, so the evaluator can read :data:`ASSETS` too.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import Any

__all__ = ["ASSETS", "NetworkTried", "network_attempts", "offline"]

ASSETS = Path(__file__).resolve().parent / "assets"
"""The USD assets Isaac Lab's cartpole loads, under the layout of NVIDIA's asset root
(``Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd``, the ground plane): authored for
this project (docs/engines.md says what they hold)."""

_TRIED: list[str] = []
_LOCAL_HOSTS = (None, "localhost", "127.0.0.1", "::1")


class NetworkTried(RuntimeError):
    """Something in the worker tried the network during an episode (an infrastructure
    failure: the engine must run offline)."""


def offline() -> None:
    """Point Isaac Lab at the shipped assets and refuse every outgoing connection (idempotent)."""
    os.environ["ISAACSIM_ASSET_ROOT"] = str(ASSETS)
    if getattr(socket.socket.connect, "_ale_refuses", False):
        return

    def refuse(self: socket.socket, address: Any) -> Any:
        if self.family != socket.AF_UNIX and not _loopback(address):
            _TRIED.append(f"connect({address!r})")
            raise OSError(f"network refused in the isaaclab engine: {address!r}")
        return _connect(self, address)

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in _LOCAL_HOSTS:
            _TRIED.append(f"getaddrinfo({host!r})")
            raise OSError(f"network refused in the isaaclab engine: {host!r}")
        return _lookup(host, *args, **kwargs)

    _connect, _lookup = socket.socket.connect, socket.getaddrinfo
    refuse._ale_refuses = True  # type: ignore[attr-defined]
    socket.socket.connect = refuse  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = resolve


def _loopback(address: Any) -> bool:
    """An address on this host (the worker protocol's own sockets may be)."""
    host = address[0] if isinstance(address, tuple) and address else None
    try:
        return isinstance(host, str) and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def network_attempts() -> list[str]:
    """What tried the network in this process since :func:`offline` (refused)."""
    return list(_TRIED)
