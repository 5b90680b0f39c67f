"""``ale-robotics view``: a built site served over HTTP on a loopback address.

A static site can be opened from disk, but a server gives it a URL to paste into
a browser on the same machine (or through an SSH tunnel), and the same origin
for every page. :class:`ReportServer` is the standard library's threading HTTP
server over the site's directory: nothing is generated per request, directory
listings are off, and each response carries the same Content-Security-Policy as
the pages, so a page cannot make the browser load anything from elsewhere.
"""

from __future__ import annotations

import functools
import socket
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from ale_robotics.errors import InvalidArgumentError

__all__ = ["CSP", "ReportServer", "serve_directory"]

CSP: Final = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
"""Sent with every response (the pages also carry it in a meta tag, for file://)."""


class _Handler(SimpleHTTPRequestHandler):
    """Files of the site only: no directory listing, no caching, quiet."""

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def list_directory(self, path: Any) -> None:
        self.send_error(HTTPStatus.NOT_FOUND, "No such page")
        return None

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: stdout is the URL the command printed, stderr its messages."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class ReportServer:
    """The site in ``directory`` served on ``host:port`` (port 0: a free one).

    Binds at once, so a port in use is an error here, before anything is printed.
    """

    def __init__(self, directory: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        if not (directory / "index.html").is_file():
            raise InvalidArgumentError(f"no index.html in {directory}: build the site first")
        handler = functools.partial(_Handler, directory=str(directory))
        cls = _Server6 if ":" in host else _Server
        try:
            self._server = cls((host, port), handler)
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port "
                "(0 picks a free one) or --host"
            ) from None
        self.directory = directory

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The site's address, ``http://127.0.0.1:PORT/``."""
        host = str(self._server.server_address[0])
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (from another thread) or an exception (Ctrl-C)."""
        self._server.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        self._server.shutdown()

    def close(self) -> None:
        self._server.server_close()


def serve_directory(directory: Path, host: str = "127.0.0.1", port: int = 0) -> ReportServer:
    """A :class:`ReportServer` bound and ready (call its ``serve_forever``)."""
    return ReportServer(directory, host, port)
