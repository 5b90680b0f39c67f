"""Listener and endpoint addresses: Unix sockets by default, ``host:port`` for TCP."""

from __future__ import annotations

import ipaddress
import os

__all__ = ["is_loopback", "normalize_address", "split_host_port"]


def normalize_address(addr: str) -> str:
    """``unix:PATH`` / ``unix://ABS`` / a bare path -> gRPC's unix form; ``host:port`` unchanged."""
    if addr.startswith("unix://"):
        return addr
    if addr.startswith("unix:"):
        return "unix://" + os.path.abspath(addr[5:])
    if addr.startswith(("/", ".")):
        return "unix://" + os.path.abspath(addr)
    return addr


def split_host_port(addr: str) -> tuple[str, int] | None:
    """``host:port`` / ``[v6]:port`` -> (host, port), the brackets removed; None for a Unix
    address (``unix:``, a path) or anything without a numeric port."""
    if addr.startswith(("unix:", "/", ".")):
        return None
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:  # an IPv6 address without brackets: ambiguous
        return None
    return host, int(port)


def is_loopback(addr: str) -> bool:
    """Whether a TCP ``host:port`` reaches this host only: ``localhost`` or a loopback IP
    (127.0.0.0/8, ::1). A wildcard (``0.0.0.0``, ``[::]``) or any other name is not:
    what it names is reachable, or resolved, off this host."""
    where = split_host_port(addr)
    if where is None:
        return False
    host = where[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
