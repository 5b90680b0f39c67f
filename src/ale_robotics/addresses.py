"""Listener and endpoint addresses: Unix sockets by default, ``host:port`` for TCP."""

from __future__ import annotations

import os

__all__ = ["normalize_address"]


def normalize_address(addr: str) -> str:
    """``unix:PATH`` / ``unix://ABS`` / a bare path -> gRPC's unix form; ``host:port`` unchanged."""
    if addr.startswith("unix://"):
        return addr
    if addr.startswith("unix:"):
        return "unix://" + os.path.abspath(addr[5:])
    if addr.startswith(("/", ".")):
        return "unix://" + os.path.abspath(addr)
    return addr
